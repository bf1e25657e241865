"""Spec tooling: the machine-readable side of spec/SPEC.md.

``manifest`` extracts and loads the catalogue of every IPC struct (a manifest per release),
``codegen`` turns a manifest back into msgspec structs, ``diff`` classifies the changes between
two manifests, ``wire_form`` reads msgpack bytes as a form tree (the byte rules), ``values``
builds the sample values, and ``golden`` stores the golden vectors and refusal cases that pin
the bytes. Used by the suite (conformance), by the reference tools and by the CLI; it imports
neither the suite nor the serving engine.
"""
