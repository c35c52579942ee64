"""Stand-ins for hardware shared by every test: fake host trees, commands, NVML, metadata."""
