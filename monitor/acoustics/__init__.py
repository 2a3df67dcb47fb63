"""Sound levels per IEC 61672-1: the IEC 61672-1 meter, its filters and their cache, WAV files."""
