// Placeholder: the DeviceNode library is being written (issue 4).
