"""Proof that the suite fails implementations that break a MUST: the requirement table
(spec requirement -> Required checks -> planted violations that make them fail) and the
mutation score of the suite against mutants of the reference implementation."""
