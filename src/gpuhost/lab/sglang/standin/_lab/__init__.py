"""The stand-in's machinery (not part of SGLang's surface)."""
