"""Reading: path/URL -> node -> pyramid -> dask levels; the one hierarchy walker."""
