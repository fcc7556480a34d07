// A fake GPU device plugin for the tests (scripts/test-servers
// fake-gpu-device-plugin builds it): it speaks the kubelet's device-plugin
// API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1), registers a resource
// (default nvidia.com/gpu) with N healthy devices, and answers Allocate
// with the devices' IDs in NVIDIA_VISIBLE_DEVICES, as NVIDIA's plugin does,
// so the kubelet admits and starts GPU pods on a machine without GPUs.
//
//	fake-gpu-device-plugin -dir DEVICE_PLUGINS_DIR [-count 4] [-resource nvidia.com/gpu]
//
// It serves until SIGTERM, and registers again when the kubelet restarts
// (the kubelet's socket is created anew).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		log.Printf("allocate %v", c.DevicesIds)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func register(dir, endpoint, resource string) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     endpoint,
		ResourceName: resource,
	})
	return err
}

// kubeletSocketID identifies the kubelet's registration socket: a new one
// means a restarted kubelet, which has forgotten every plugin.
func kubeletSocketID(dir string) (uint64, bool) {
	st, err := os.Stat(filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		return 0, false
	}
	return st.Sys().(*syscall.Stat_t).Ino, true
}

func main() {
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin directory")
	count := flag.Int("count", 4, "devices to advertise")
	resource := flag.String("resource", "nvidia.com/gpu", "extended resource name")
	flag.Parse()
	if *count < 1 {
		log.Fatalf("-count %d: must be at least 1", *count)
	}
	p := &plugin{}
	for i := 0; i < *count; i++ {
		p.devices = append(p.devices, &pluginapi.Device{ID: fmt.Sprintf("fake-gpu-%d", i), Health: pluginapi.Healthy})
	}
	endpoint := "fake-gpu-" + strings.NewReplacer("/", "-", ".", "-").Replace(*resource) + ".sock"
	sock := filepath.Join(*dir, endpoint)
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		log.Fatalf("%s: %v", sock, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(lis) }()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var registered uint64
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if id, ok := kubeletSocketID(*dir); ok && id != registered {
			if err := register(*dir, endpoint, *resource); err != nil {
				log.Printf("register with the kubelet: %v (retrying)", err)
			} else {
				registered = id
				log.Printf("registered %s with %d devices", *resource, *count)
			}
		}
		select {
		case <-stop:
			srv.Stop()
			_ = os.Remove(sock)
			return
		case <-tick.C:
		}
	}
}
