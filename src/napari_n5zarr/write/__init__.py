"""Writing, by feature: :mod:`.export` (an array or layer -> a new pyramid, plan -> write ->
publish), :mod:`.edit` (proofreading saves into an existing labels pyramid, new labels),
:mod:`.convert` (existing containers -> new pyramids, whole or a region, or made dual in
place). Shared by them: :mod:`.pyramid` (downsampling), :mod:`.ome` (OME-NGFF metadata),
:mod:`.safe_destination` (locks, staging) and :mod:`.dataset_files` (every file beside user
data, never through a link)."""
