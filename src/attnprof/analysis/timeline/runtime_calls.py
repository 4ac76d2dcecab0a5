"""What a host runtime call does, by its name: the kinds the idle analysis gives idle time to.

An ordered table of (kind, regex, examples), CUDA runtime, CUDA driver and HIP names alike; the
first rule whose regex matches decides (tests/test_idle_causes.py checks that every example is
decided by its own rule and by no earlier one). A call no rule names is "other": host work in
the runtime. Where the trace records more than the name (a cudaMemcpyAsync whose copy goes to
or from pageable memory blocks the host like cudaMemcpy), attnprof.analysis.timeline.idle refines it.

- sync: the host waits for the device (synchronize calls; event and stream polls, which a
  waiting loop calls over and over);
- blocking_copy: copies that return only once the copy is done (cudaMemcpy without Async,
  hipMemcpyWithStream, the driver's synchronous cuMemcpy*);
- allocator: device and pinned host memory allocated or freed (cudaMalloc, cudaFree,
  cudaHostAlloc, hipHostMalloc, cuMemAlloc, ...): cudaFree synchronizes the device;
- init: one-time set-up (stream, event and context creation, module and library loading,
  device and function attribute queries, graph instantiation);
- stream_wait: a stream told to wait on another stream's event;
- launching: calls that put work on the device (kernels, graphs, async copies and sets) and
  the queries the launch path makes on every call (is the stream capturing, last error,
  occupancy).
"""

from __future__ import annotations

import re

from attnprof.analysis.attribution.matching import first_match, register

__all__ = ["RUNTIME_KINDS", "RuntimeKind", "runtime_kind"]

RuntimeKind = tuple[str, re.Pattern[str], tuple[str, ...]]

RUNTIME_KINDS: tuple[RuntimeKind, ...] = (
    (
        "blocking_copy",
        re.compile(
            r"^(cuda|hip)Memcpy(2D|3D)?(ToSymbol|FromSymbol|Peer)?$|^hipMemcpyWithStream$|"
            r"^hipMemcpy(DtoH|HtoD|DtoD)$|^cuMemcpy(2D|3D)?(DtoH|HtoD|DtoD|Peer)?(_v2)?$"
        ),
        (
            "cudaMemcpy",
            "cudaMemcpy2D",
            "hipMemcpy",
            "hipMemcpyWithStream",
            "hipMemcpyDtoH",
            "cuMemcpyDtoH_v2",
        ),
    ),
    (
        "sync",
        re.compile(r"(?i)synchronize|^(cuda|hip)(Event|Stream)Query$|^cu(Event|Stream)Query$|_blocking$"),
        (
            "cudaDeviceSynchronize",
            "cudaStreamSynchronize",
            "cudaEventSynchronize",
            "hipDeviceSynchronize",
            "cuCtxSynchronize",
            "cudaEventQuery",
            "hipStreamQuery",
            "cudaStreamWaitEvent_blocking",
        ),
    ),
    (
        "allocator",
        re.compile(
            r"^(cuda|hip)(Malloc|Free|HostAlloc|HostMalloc|HostFree|HostRegister|HostUnregister|"
            r"ExtMallocWithFlags|MemPool|DeviceSetMemPool)|"
            r"^cuMem(Alloc|Free|HostAlloc|FreeHost|HostRegister|HostUnregister|Create|Release|Map|Unmap|"
            r"SetAccess|AddressReserve|AddressFree|PoolCreate)"
        ),
        (
            "cudaMalloc",
            "cudaFree",
            "cudaHostAlloc",
            "cudaFreeHost",
            "cudaMallocAsync",
            "hipMalloc",
            "hipFree",
            "hipHostMalloc",
            "hipExtMallocWithFlags",
            "cuMemAlloc_v2",
            "cuMemFree_v2",
            "cuMemCreate",
        ),
    ),
    (
        "init",
        re.compile(
            r"^(cuda|hip)(StreamCreate|StreamDestroy|EventCreate|EventDestroy|SetDevice|DeviceReset|"
            r"GetDeviceProperties|DeviceGetAttribute|GetDeviceCount|DriverGetVersion|RuntimeGetVersion|"
            r"FuncGetAttributes|FuncSetAttribute|DeviceGetStreamPriorityRange|InitDevice|"
            r"GraphInstantiate|GraphCreate|GraphDestroy|GraphExecDestroy|StreamBeginCapture|"
            r"StreamEndCapture|LibraryLoad|GetDriverEntryPoint|DeviceEnablePeerAccess|"
            r"IpcOpenMemHandle|IpcGetMemHandle|GetSymbolAddress|Module(Load|GetFunction|Unload)|"
            r"CtxCreate)|"
            r"^cu(Init|CtxCreate|DevicePrimaryCtx|Module(Load|GetFunction|Unload)|Library(Load|GetKernel)|"
            r"StreamCreate|StreamDestroy|EventCreate|EventDestroy|FuncGetAttribute|FuncSetAttribute|"
            r"GetProcAddress|GraphInstantiate|KernelSetAttribute)"
        ),
        (
            "cudaStreamCreateWithFlags",
            "cudaStreamCreateWithPriority",
            "cudaEventCreateWithFlags",
            "hipEventDestroy",
            "cudaGetDeviceProperties_v2",
            "hipGetDevicePropertiesR0600",
            "cudaDeviceGetAttribute",
            "cudaFuncGetAttributes",
            "cudaFuncSetAttribute",
            "cudaDeviceGetStreamPriorityRange",
            "cudaGraphInstantiate",
            "cudaGetSymbolAddress",
            "cudaDriverGetVersion",
            "hipModuleLoadData",
            "cuModuleLoadData",
            "cuLibraryLoadData",
            "cuModuleGetFunction",
            "cuDevicePrimaryCtxRetain",
        ),
    ),
    (
        "stream_wait",
        re.compile(r"^(cuda|hip|cu)StreamWaitEvent$"),
        ("cudaStreamWaitEvent", "hipStreamWaitEvent", "cuStreamWaitEvent"),
    ),
    (
        "launching",
        re.compile(
            r"Launch|EnqueueKernel|MemcpyAsync|MemsetAsync|memcpyHtoDAsync|memcpyDtoHAsync|runFunction|"
            r"^cuMemcpy\w*Async|^cuMemset\w*Async|EventRecord|StreamIsCapturing|StreamGetCaptureInfo|"
            r"GetLastError|PeekAtLastError|OccupancyMaxActiveBlocks|StreamGetPriority|StreamGetDevice|"
            r"^(cuda|hip)GetDevice$|PushCallConfiguration|PopCallConfiguration"
        ),
        (
            "cudaLaunchKernel",
            "cudaLaunchKernelExC",
            "cuLaunchKernel",
            "cuLaunchKernelEx",
            "cudaGraphLaunch",
            "hipLaunchKernel",
            "hipExtModuleLaunchKernel",
            "hipModuleLaunchKernel",
            "cudaMemcpyAsync",
            "cudaMemsetAsync",
            "hipMemcpyAsync",
            "cuMemcpyHtoDAsync_v2",
            "cudaEventRecord",
            "cudaStreamIsCapturing",
            "cudaStreamGetCaptureInfo_v2",
            "cudaGetLastError",
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
            "hipStreamGetDevice",
            "__hipPushCallConfiguration",
        ),
    ),
)

register(rx for _, rx, _ in RUNTIME_KINDS)


def runtime_kind(name: str) -> str:
    """The kind of one runtime call (RUNTIME_KINDS), "other" when no rule names it."""
    return first_match(((kind, rx) for kind, rx, _ in RUNTIME_KINDS), name) or "other"
