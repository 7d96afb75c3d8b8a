"""The one category ranking of the open provider: every signal's categories, their order and what each means.

A finding carries the highest-ranked category of its evidence; the same order decides between a node's job-log
conclusions, and between the job-level causes the job logs show (the job's configuration explains what its program
then does, the program's own failure what the scheduler then ends, and any of them the collective timeouts that
follow). Kernel, DCGM and job-log readers all name their categories from this table, and a category not in it
cannot be produced (the catalogue loader and the tests check that).
"""

from __future__ import annotations

#: error_category token -> severity rank (higher first)
CATEGORY_RANK: dict[str, int] = {
    "gpu_off_bus": 100,  # the GPU is gone from PCIe: nothing on it can run until the machine is restarted
    "gpu_memory": 90,  # uncorrectable ECC, row-remapping failure
    "nvswitch": 80,  # fatal NVSwitch SXid
    "nvlink": 70,  # NVLink errors on a GPU
    "pcie": 60,  # uncorrectable PCIe AER error
    "gpu_unavailable": 55,  # the job could not use a GPU of the node (CUDA: no device, device unavailable)
    "gpu_hardware": 50,  # other GPU hardware faults (micro-controller halt, init failure, fatal timeout)
    "gpu_firmware": 40,  # GSP (GPU System Processor) RPC timeout or error: hardware or driver
    "gpu_driver": 30,  # driver-side fault or driver verdict that needs a GPU reset or reboot
    "host_oom": 28,  # the kernel's OOM killer ended a rank
    "process_killed": 26,  # a rank ended by a signal
    "network": 24,  # a rank's network connection to its peers failed
    "collective_hang": 22,  # a rank fell behind its group's collectives
    "process_exit": 20,  # a rank exited with an error code
    # the job's own causes, below every node category: they point at the job, never a node
    "configuration": 18,  # the job's configuration or environment: the same on every node it ran on
    "application": 16,  # the job's own code
    "scheduler": 14,  # the workload manager ended the job (time limit, preemption, cancellation)
    "collective_timeout": 12,  # every rank's collectives timed out together: the job as a whole
}

#: what each category indicates, for the docs and for operators reading a finding
CATEGORY_MEANING: dict[str, str] = {
    "gpu_off_bus": "a GPU fell off the PCIe bus (Xid 79 or the driver's probe-time message); hardware or platform",
    "gpu_memory": "uncorrectable GPU memory errors or a row-remapping failure; hardware",
    "nvswitch": "a fatal NVSwitch error (SXid); hardware or fabric",
    "nvlink": "a fatal NVLink error on a GPU (Xid 74, 136, 144-150, 155); hardware or interconnect",
    "pcie": "an uncorrectable PCIe AER error or a PCIe fatal timeout on the node; hardware or platform",
    "gpu_unavailable": "a GPU of the node could not be used by the job (CUDA reported it missing or unavailable)",
    "gpu_hardware": "another GPU hardware fault (micro-controller halt, init or probe failure, fatal timeout)",
    "gpu_firmware": "a GSP firmware RPC timeout or GSP error (Xid 119, 120); hardware or driver",
    "gpu_driver": "a driver-side GPU fault, or the driver's verdict that the GPU needs a reset or reboot",
    "host_oom": "the kernel's OOM killer ended a rank of the job on this node",
    "process_killed": "a rank of the job on this node was ended by a signal",
    "network": "a rank's network connection to its peers failed on this node",
    "collective_hang": "a rank on this node fell behind the others of its process group",
    "process_exit": "a rank of the job on this node exited with an error",
    "application": "an error NVIDIA attributes to the user application (RESTART_APP codes such as Xid 13, 31), "
    "or the job's own code failed",
    "collective_timeout": "every rank's collectives timed out together: the job as a whole, no rank singled out",
    "configuration": "the job's configuration or environment failed (a setting, a limit, a library, a launch option), "
    "or every node that reported shows the same sign that it cannot run the job as it is",
    "scheduler": "the workload manager ended the job by its own action (time limit, preemption, cancellation)",
}
