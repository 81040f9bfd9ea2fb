"""Helpers every stage uses and none owns: atomic JSON (`jsonio`), safe YAML (`yamlio`), containment of
paths (`paths`), signals and worker processes (`interrupt`), the shipped files (`resources`)."""
