// Package hugeheap asks the kernel to back the Go heap with transparent huge
// pages where the system leaves that to the program (THP "madvise" mode).
//
// Why: a cluster-B fabric is gigabytes of ports, links and frames touched at
// random; with 4 KiB pages nearly every touch also misses the TLB and walks a
// page table that does not fit in cache either, which on a virtual machine
// costs as much as the miss itself. With 2 MiB pages the page tables fit.
//
// The Go runtime maps heap memory with mmap and does not advise it. Reserve
// grows the heap by one large untouched allocation, advises that range
// (MADV_HUGEPAGE), and frees it: the runtime hands the same, still untouched
// pages to later allocations, whose first touch then faults in huge pages.
// The advice survives the runtime's MADV_DONTNEED when it returns memory.
// It knows nothing of the simulator.
package hugeheap
