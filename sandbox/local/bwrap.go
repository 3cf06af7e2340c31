package local

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/goai-sdk/goai/chat"
)

// The bubblewrap profile. A command sees:
//
//   - /usr, and /bin, /sbin and /lib* (as the symlinks they are on a
//     merged-/usr system, else read-only binds);
//   - a minimal /etc: the files a shell, git and name resolution read
//     (passwd and group, not shadow), read-only;
//   - Options.ReadOnlyBinds, read-only;
//   - a fresh /dev, /proc (its own PID namespace) and a private /tmp;
//   - the workspace, read-write, at its host path.
//
// Nothing else of the host is mounted: not the user's home, not the goai
// data directory, not /root, /var or /run. Every namespace is unshared
// (network too, unless Options.Network), every capability is dropped, and
// where the kernel allows user namespaces the command runs as the
// unprivileged uid/gid 65534 inside one, so even a root-run goai gives its
// commands no power to mount, remount or change ownership.

// sandboxUID is the uid and gid commands run as inside the user namespace
// (nobody/nogroup).
const sandboxUID = "65534"

// hostDirs are the top-level directories a shell needs, bound read-only
// (or recreated as symlinks when they are symlinks on the host).
var hostDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcFiles is the minimal /etc.
var etcFiles = []string{
	"passwd", "group", "nsswitch.conf", "hosts", "host.conf", "resolv.conf",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime",
	"timezone", "ssl", "ca-certificates", "gitconfig", "os-release", "mime.types",
}

// basePath is the PATH of an isolated command.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// usernsProbe caches whether bwrap can create a user namespace here.
type usernsProbe struct {
	once sync.Once
	ok   bool
}

// userns reports whether bwrap can run a command in a new user namespace as
// sandboxUID (not possible in some containers and hardened kernels).
func (p *Provider) userns() bool {
	p.probe.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		args := append(mountArgs(), "--unshare-all", "--unshare-user", "--uid", sandboxUID, "--gid", sandboxUID,
			"--cap-drop", "ALL", "--die-with-parent", "--", "true")
		c := exec.CommandContext(ctx, p.bwrap(), args...)
		c.Env = []string{"PATH=" + basePath}
		err := c.Run()
		p.probe.ok = err == nil
		if err != nil {
			p.logger.Debug("local: bubblewrap without a user namespace (unavailable here)", "category", chat.CatSandbox, "error", err)
		}
	})
	return p.probe.ok
}

// mountArgs are the read-only host mounts of the profile.
func mountArgs() []string {
	var args []string
	for _, d := range hostDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	args = append(args, "--dir", "/etc")
	for _, f := range etcFiles {
		p := filepath.Join("/etc", f)
		args = append(args, "--ro-bind-try", p, p)
	}
	return append(args, "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
}

// nsInit is the host pid of a bubblewrapped command's PID-namespace init,
// which bwrap reports on its --info-fd once the sandbox is set up. SIGKILL
// to it ends every process of the command, whatever session or group they
// moved to (the command runs in a new session, out of reach of a
// process-group signal), and whether or not bwrap itself was killed
// before --die-with-parent was armed.
type nsInit struct {
	r, w  *os.File
	ready chan struct{}
	pid   int
}

func newNSInit() (*nsInit, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &nsInit{r: r, w: w, ready: make(chan struct{})}, nil
}

// started reads bwrap's report; call it after Start (abort after a failed
// Start).
func (n *nsInit) started(reg *registry) {
	n.w.Close()
	go func() {
		defer close(n.ready)
		defer n.r.Close()
		var info struct {
			ChildPID int `json:"child-pid"`
		}
		if json.NewDecoder(n.r).Decode(&info) == nil && info.ChildPID > 0 {
			n.pid = info.ChildPID
			// The init leads its own session and group: Destroy kills
			// it with the command's group.
			reg.add(info.ChildPID)
		}
	}()
}

func (n *nsInit) abort() {
	n.w.Close()
	n.r.Close()
	close(n.ready)
}

// kill SIGKILLs the namespace, waiting up to wait for bwrap's report.
func (n *nsInit) kill(wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-n.ready:
	case <-t.C:
		return
	}
	if n.pid > 0 {
		_ = syscall.Kill(n.pid, syscall.SIGKILL)
	}
}

// bwrapArgs is the full bwrap command line for cmd run in dir; bwrap
// reports the namespace's init on file descriptor 3. A detached command
// does not die with its parent.
func (h *Handle) bwrapArgs(dir, cmd string, detach bool) []string {
	o := &h.p.opts
	args := mountArgs()
	for _, b := range o.ReadOnlyBinds {
		args = append(args, "--ro-bind-try", b, b)
	}
	args = append(args,
		"--bind", h.realRoot, h.root,
		"--chdir", dir,
		"--unshare-all",
	)
	if o.Network {
		args = append(args, "--share-net")
	}
	if h.p.userns() {
		args = append(args, "--unshare-user", "--uid", sandboxUID, "--gid", sandboxUID)
	}
	args = append(args, "--cap-drop", "ALL", "--info-fd", "3")
	if !detach {
		args = append(args, "--die-with-parent")
	}
	return append(args, "--new-session", "--", "sh", "-c", cmd)
}

// isolatedEnviron is the environment of a bubblewrapped command: PATH, HOME
// (the private /tmp) and LANG, then the handle and call environments.
// Nothing else of the host's environment is passed.
func isolatedEnviron() map[string]string {
	lang := os.Getenv("LANG")
	if lang == "" {
		lang = "C.UTF-8"
	}
	return map[string]string{"PATH": basePath, "HOME": "/tmp", "LANG": lang}
}
