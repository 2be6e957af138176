"""The command line: parses, calls the library, prints. No logic of its own."""
