import torch


def pytest_benchmark_update_machine_info(config, machine_info):
    """Record the library versions a benchmark ran with (compare only like with like)."""
    import torch_geometric

    machine_info["torch"] = torch.__version__
    machine_info["torch_geometric"] = torch_geometric.__version__
    machine_info["cuda"] = torch.version.cuda
    machine_info["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    machine_info["threads"] = torch.get_num_threads()
