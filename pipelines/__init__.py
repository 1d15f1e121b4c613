"""Pipeline stages. Each subpackage holds pure logic plus one ``transforms.py`` (the
only module there that imports Apache Beam)."""
