"""The Isaac Lab code of the generated modules, as real modules (``export/emit.py`` copies them).

``sysid_dr_isaaclab.py`` (the fit's actuator and event terms, ``scripts/export_dr.py``),
``payload_isaaclab.py`` (``scripts/identify_payload.py``) and ``contact_isaaclab.py``
(``scripts/identify_contact.py``). Each imports only Isaac Lab (and torch) and reads its
numbers from the module-level names of its data block, which the export replaces with the
identification's literals; as shipped here the block holds an empty export, so each template
imports and builds (tests/test_export_templates.py). The package never imports them: they
need Isaac Lab.
"""
