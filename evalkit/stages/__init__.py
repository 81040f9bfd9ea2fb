"""One run as stages: plan → extract → score → render → record (`runner`), one member × backend
(`pipeline`), the judge phase (`judge`, `pairwise`), corpus checks that score truth against itself
(`validate`)."""
