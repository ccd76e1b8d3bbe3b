"""Getting trace bytes: reading files and URLs, finding runs under a log dir."""
