package shell

import (
	"path"
	"slices"
	"strings"
)

// risk says how bad it is to destroy or overwrite a path.
type risk int

const (
	riskOrdinary risk = iota
	// riskSystem: system directories, devices and credential stores;
	// nothing in them is written.
	riskSystem
	// riskRoot: "/", a top-level directory, a home directory, everything
	// in one of those, or a variable that may be empty followed by "/".
	riskRoot
)

// systemDirs are written only by a package manager or an administrator.
var systemDirs = []string{
	"/etc", "/boot", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/usr", "/sys", "/proc", "/System", "/private/etc",
}

// harmlessDevices may be written: they are not disks or memory.
var harmlessDevices = []string{
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
	"/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty",
	"/dev/fd/", "/dev/tcp/", "/dev/udp/", "/dev/pts/", "/dev/shm/",
}

// credentialDirs, relative to a home directory, hold keys that let whoever
// writes them log in or sign as the user.
var credentialDirs = []string{".ssh", ".gnupg", ".aws", ".kube", ".docker", ".config/gcloud"}

// pathRisk judges the word s (as produced by wordText) naming a path.
// home is the user's home directory ("" when unknown).
func pathRisk(s, home string) risk {
	worst := riskOrdinary
	for _, alt := range braceAlternatives(s) {
		worst = max(worst, pathRiskOne(alt, home))
	}
	return worst
}

func pathRiskOne(s, home string) risk {
	switch {
	case s == "":
		return riskOrdinary
	case strings.HasPrefix(s, dyn) || strings.HasPrefix(s, dynNonEmpty):
		// "$DIR/" and "$DIR/*" are "/" and "/*" when DIR is empty or
		// unset: the Steam uninstaller bug. ${DIR:?} cannot be empty.
		if strings.HasPrefix(s, dynNonEmpty) {
			return riskOrdinary
		}
		rest := strings.TrimLeft(s, dyn)
		if rest == "" || rest[0] != '/' {
			return riskOrdinary
		}
		if c := path.Clean(rest); c == "/" || strings.HasPrefix(rest, "/*") || strings.HasPrefix(rest, "/.*") {
			return riskRoot
		}
		return riskOrdinary
	case s[0] == '~':
		rel := ""
		if i := strings.IndexByte(s, '/'); i >= 0 {
			rel = s[i+1:]
		}
		return homeRisk(rel)
	case s[0] == '/':
		return absRisk(s, home)
	}
	return riskOrdinary
}

// homeRisk judges rel, a path relative to a home directory.
func homeRisk(rel string) risk {
	if g := strings.IndexAny(rel, "*?["); g >= 0 {
		dir := rel[:strings.LastIndexByte(rel[:g], '/')+1]
		if r := homeRisk(strings.TrimSuffix(dir, "/")); r > riskOrdinary {
			return r
		}
		rel = dir + "x"
	}
	c := path.Clean("/" + rel)
	if c == "/" {
		return riskRoot
	}
	for _, d := range credentialDirs {
		if c == "/"+d || strings.HasPrefix(c, "/"+d+"/") {
			return riskSystem
		}
	}
	return riskOrdinary
}

// absRisk judges an absolute path.
func absRisk(s, home string) risk {
	if g := strings.IndexAny(s, "*?["); g >= 0 {
		// A glob stands for everything in the directory before it.
		dir := s[:strings.LastIndexByte(s[:g], '/')+1]
		if r := absRisk(dir, home); r > riskOrdinary {
			return r
		}
		return absRisk(path.Join(dir, "x"), home)
	}
	c := path.Clean(s)
	if home != "" && home != "/" {
		h := path.Clean(home)
		if c == h {
			return riskRoot
		}
		if strings.HasPrefix(c, h+"/") {
			return homeRisk(strings.TrimPrefix(c, h+"/"))
		}
	}
	if strings.HasPrefix(c, "/dev/") {
		if isHarmlessDevice(c) {
			return riskOrdinary
		}
		return riskSystem
	}
	if c == "/usr/local" || strings.HasPrefix(c, "/usr/local/") {
		return riskOrdinary
	}
	for _, d := range systemDirs {
		if c == d || strings.HasPrefix(c, d+"/") {
			return riskSystem
		}
	}
	if strings.Count(c, "/") <= 1 {
		return riskRoot // "/" or a top-level directory
	}
	if strings.Count(c, "/") == 2 && (strings.HasPrefix(c, "/home/") || strings.HasPrefix(c, "/Users/")) {
		return riskRoot // someone's home directory
	}
	return riskOrdinary
}

// secretFiles are file names that usually hold credentials.
var secretFiles = []string{
	".netrc", ".git-credentials", ".pgpass", ".npmrc", ".pypirc", ".my.cnf",
	"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "credentials", "shadow", "gshadow", "sudoers",
}

// holdsSecrets reports whether the path s (as produced by wordText) names
// a file or directory that usually holds credentials: a credential
// directory of a home (~/.ssh, ~/.aws, ...), a .env file, a key.
func holdsSecrets(s, home string) bool {
	if s == "" || !strings.ContainsAny(s, "/.~") {
		return false
	}
	for _, alt := range braceAlternatives(s) {
		name := path.Base(alt)
		if name == ".env" || strings.HasPrefix(name, ".env.") || slices.Contains(secretFiles, name) {
			return true
		}
		switch {
		case alt[0] == '~':
			rel := ""
			if i := strings.IndexByte(alt, '/'); i >= 0 {
				rel = alt[i+1:]
			}
			if homeRisk(rel) == riskSystem {
				return true
			}
		case alt[0] == '/' && home != "" && home != "/":
			c, h := path.Clean(alt), path.Clean(home)
			if strings.HasPrefix(c, h+"/") && homeRisk(strings.TrimPrefix(c, h+"/")) == riskSystem {
				return true
			}
		}
	}
	return false
}
