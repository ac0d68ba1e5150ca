"""The write path and a memory's life: add, duplicates, vectors (and the deferred embed queue), trash,
patch, pending confirmations, batches."""
