"""Edit: proofreading saves into an existing labels pyramid (only changed voxels, journaled, locked)."""
