"""Every sim.* procedure the simulator answers is documented in
docs/simulator.md, with the parameters its code reads and an example; the
README points there. A procedure added without its section fails here."""
import os
import re

from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "simulator.md")


def procedures():
    """The sim.* names the simulator's dispatch compares a procedure with."""
    names = set()
    for f in os.listdir(os.path.join(ROOT, "src", "sim")):
        if f.endswith(".c"):
            text = open(os.path.join(ROOT, "src", "sim", f)).read()
            names |= set(re.findall(r'mcdc_str_ieq\(\s*p\s*,\s*"(sim\.\w+)"\s*\)', text))
    assert len(names) >= 14, names  # the pattern still finds the dispatch
    return names


def sections():
    """docs/simulator.md's sections: name -> its text."""
    parts = re.split(r"^### (sim\.\w+)\s*$", open(DOC).read(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


# The procedures whose dispatch hands the arguments to a function elsewhere.
DELEGATED = {"sim.workload": ("sim_work.c", "sim_work_start"), "sim.bulk_load": ("sim_work.c", "sim_work_bulk_load"),
             "sim.bulk_load_table": ("sim_work.c", "sim_work_bulk_load_table"),
             "sim.create_tables": ("sim_create_tables.c", "sim_work_create_tables")}


def parameters(name):
    """The @parameters the simulator reads for a procedure: in its statement
    of the dispatch (sim_cdc.c), or in the function it hands them to."""
    src = open(os.path.join(ROOT, "src", "sim", "sim_cdc.c")).read()
    m = re.search(r'mcdc_str_ieq\(p, "%s"\)(.*?)(?=\n    (?:\} else|if \())' % re.escape(name),
                  src, flags=re.S)
    assert m, f"{name}: its statement in sim_cdc.c's dispatch is not where the test looks"
    body = m.group(1)
    if name in DELEGATED:
        file, fn = DELEGATED[name]
        text = open(os.path.join(ROOT, "src", "sim", file)).read()
        d = re.search(r"^int %s\(.*?^}" % fn, text, flags=re.S | re.M)
        assert d, f"{name}: {fn} not found in {file}"
        body = d.group(0)
    return set(re.findall(r'"(@\w+)"', body))


def test_every_sim_procedure_is_documented_with_its_parameters_and_an_example():
    docs = sections()
    missing = sorted(procedures() - set(docs))
    assert not missing, f"sim procedures missing from docs/simulator.md: {missing}"
    stale = sorted(set(docs) - procedures())
    assert not stale, f"docs/simulator.md documents procedures the simulator lacks: {stale}"
    for name, text in docs.items():
        assert re.search(r"^    EXEC %s\b" % re.escape(name), text, flags=re.M | re.I), \
            f"{name}: no example"
        for param in parameters(name):
            assert f"`{param}`" in text, f"{name}: parameter {param} undocumented"


def test_the_readme_points_to_the_procedures_page():
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert "docs/simulator.md" in readme
