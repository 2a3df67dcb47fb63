"""The local journal: the SQLite store, the chain kinds, the migrations, the configuration record."""
