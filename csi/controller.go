package csi

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
)

type controllerServer struct {
	csi.UnimplementedControllerServer
	d *Driver
}
