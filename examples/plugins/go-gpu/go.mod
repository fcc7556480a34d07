module wasmsched.io/examples/gpu-origin

go 1.24

require wasmsched.io/plugin-sdk-go v0.0.0

replace wasmsched.io/plugin-sdk-go => ../../../plugins/sdk-go
