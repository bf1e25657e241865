"""Tools that exist for the reference implementation (reference_impl), not for third parties.

``adapter`` exposes the reference to the suite (loaded by name: ``--impl reference``), ``bench``
measures its codec and its serving engine, ``fuzz`` fuzzes its decoders, ``e2e`` starts its
server and records a scenario for the suite's E2E checks, and ``proof`` plants violations in it
(mutants) to prove that the suite's Required checks catch each MUST. These may import anything;
nothing in the suite or the reference implementation imports them.
"""
