"""Where bytes live: hardened local folders and remote (HTTP/S3) stores with timeouts."""
