"""How the library runs beside other processes: data-parallel passes under torchrun (distributed), child
processes that stop with their parent (children), where the dashboard listens (serving), whether the
Hugging Face hub answers (hub_probe)."""
