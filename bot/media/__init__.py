"""Media: the blob store chosen by config, its retention, and the signed links that serve blobs."""
