//! The wgpu adapter of burn-route's own Cube tests and benches: the one the generated op check
//! uses, named by `BURN_ROUTE_WGPU_ADAPTER` (`cpu` by default, as CI; `gpu` on a machine with
//! one, as `scripts/gpu-check` sets; see `burn_route_runtime::check::wgpu_adapter`).

/// The adapter as the `DeviceKind` of `Device::wgpu`.
#[allow(dead_code)] // (not every binary that includes this file builds a `Device`)
pub fn device_kind() -> burn_tensor::DeviceKind {
    burn_route_runtime::check::wgpu_adapter()
}

/// The adapter as cubecl's `WgpuDeviceKind`, for a `CubeDevice` built directly.
#[cfg(feature = "wgpu")]
#[allow(dead_code)] // (not every binary that includes this file builds a `CubeDevice`)
pub fn wgpu_device_kind() -> burn_cubecl::cubecl::wgpu::WgpuDeviceKind {
    use burn_cubecl::cubecl::wgpu::WgpuDeviceKind;
    use burn_tensor::DeviceKind;
    match device_kind() {
        DeviceKind::Cpu => WgpuDeviceKind::Cpu,
        DeviceKind::DiscreteGpu(i) => WgpuDeviceKind::DiscreteGpu(i),
        DeviceKind::IntegratedGpu(i) => WgpuDeviceKind::IntegratedGpu(i),
        _ => WgpuDeviceKind::DefaultDevice,
    }
}
