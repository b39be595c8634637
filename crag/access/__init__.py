"""Who may read which document: the per-folder access file and group membership."""
