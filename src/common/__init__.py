"""Used by every layer: errors, redaction, owners of shared folders, safe file names, progress, GC."""
