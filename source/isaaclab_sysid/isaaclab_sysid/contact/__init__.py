"""Contact stiffness and damping: a quasi-static press and impacts at several speeds.

``io`` (contact runs: a run plus its contact force and test metadata) -> ``geometry`` (the tip along
the surface normal) -> ``identify`` (stiffness and damping with intervals and checks) -> ``mapping``
(MuJoCo solref/solimp, Isaac Lab PhysX material) and ``export``; ``twin`` is a MuJoCo table contact
with hidden truth. See docs/contact.md.
"""

from isaaclab_sysid.contact.identify import ContactEstimate, ContactInputError, ContactOptions, identify_contact
from isaaclab_sysid.contact.io import ContactRun, ContactTest, read_contact_run, write_contact_run

__all__ = [
    "ContactEstimate",
    "ContactInputError",
    "ContactOptions",
    "ContactRun",
    "ContactTest",
    "identify_contact",
    "read_contact_run",
    "write_contact_run",
]
