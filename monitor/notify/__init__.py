"""What reaches people: alerts, notices of violation, delivery and the notice documents."""
