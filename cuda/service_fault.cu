/*
 * service_fault.cu
 *    A test-only entry point of the GPU back end for the GPU service's
 *    fault test (gpuclust.service_test_fault, src/service_main.c): a
 *    kernel that writes to an illegal address, which leaves the device
 *    context unusable (a sticky cudaErrorIllegalAddress), as a bug in a
 *    kernel would.  Exported by name beside gpuclust_cuda_api(); the
 *    service finds it with dlsym.
 */
#include "common.cuh"

namespace {

/* Writes through p, an address no allocation holds: the device faults. */
__global__ void test_fault_kernel(int *p /* [32], not mapped */)
{
	p[threadIdx.x] = (int) threadIdx.x;
}

} // namespace

extern "C" {

/*
 * Breaks the context of device_id on purpose; returns GC_ERR_CUDA with the
 * CUDA error in last_error() (GC_ERR_INTERNAL if the device did not fault).
 */
__attribute__((visibility("default"))) gc_status gpuclust_cuda_test_fault(int32_t device_id)
{
	GC_ENTRY_BEGIN
	cudaError_t err;

	gc::use_device(device_id);
	test_fault_kernel<<<1, 32>>>(reinterpret_cast<int *>(static_cast<uintptr_t>(0x10)));
	err = cudaDeviceSynchronize();
	if (err == cudaSuccess)
		err = cudaGetLastError();
	if (err == cudaSuccess)
		return gc::set_error(GC_ERR_INTERNAL, "the test fault kernel wrote to an illegal address without a fault");
	return gc::set_error(GC_ERR_CUDA, "gpuclust.service_test_fault: %s (%s) in the test fault kernel",
						 cudaGetErrorString(err), cudaGetErrorName(err));
	GC_ENTRY_END
}

} // extern "C"
