package deploy_test

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeService is the part of a docker-compose.yml service the deploy checks read.
type composeService struct {
	Image       string            `yaml:"image"`
	Build       map[string]string `yaml:"build"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Restart     string            `yaml:"restart"`
	Environment map[string]string `yaml:"environment"`
	Healthcheck map[string]any    `yaml:"healthcheck"`
	Profiles    []string          `yaml:"profiles"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

func composeServices(t *testing.T) map[string]composeService {
	t.Helper()
	var c struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "docker-compose.yml")), &c); err != nil {
		t.Fatal(err)
	}
	return c.Services
}

// TestComposeS3RunsTheImagesBinary: the s3 service's entrypoint executes versitygw where the
// image has it. versity/versitygw moved the binary from /app/versitygw to
// /usr/local/bin/versitygw in v1.0.19; the old path exits 127 and the workers, which wait for
// a healthy s3, never start. The CI stand-in (test/deploy/images/versitygw.Dockerfile) must
// put it at the same path, or the compose stage would prove a different layout.
func TestComposeS3RunsTheImagesBinary(t *testing.T) {
	const binary = "/usr/local/bin/versitygw"
	s3 := composeServices(t)["s3"]
	if !strings.Contains(strings.Join(s3.Entrypoint, " "), "exec "+binary+" ") {
		t.Errorf("s3 entrypoint %q does not exec %s, where versity/versitygw images since v1.0.19 ship it", s3.Entrypoint, binary)
	}
	v := regexp.MustCompile(`:\$\{VERSITYGW_VERSION:-v(\d+)\.(\d+)\.(\d+)\}$`).FindStringSubmatch(s3.Image)
	if v == nil {
		t.Fatalf("s3 image %q: want versity/versitygw:${VERSITYGW_VERSION:-vX.Y.Z}", s3.Image)
	}
	major, _ := strconv.Atoi(v[1])
	minor, _ := strconv.Atoi(v[2])
	patch, _ := strconv.Atoi(v[3])
	if major < 1 || (major == 1 && minor == 0 && patch < 19) {
		t.Errorf("s3 image %q predates v1.0.19, whose binary is /app/versitygw", s3.Image)
	}
	if df := readFile(t, "test/deploy/images/versitygw.Dockerfile"); !strings.Contains(df, "COPY versitygw "+binary+"\n") {
		t.Errorf("test/deploy/images/versitygw.Dockerfile does not copy versitygw to %s", binary)
	}
}

// TestComposeUICORSOriginsAreTheUIs: TEMPORAL_CORS_ORIGINS lists the origins the Web UI's own
// pages come from, the host port temporal-ui publishes; any other origin (once Grafana's
// port) makes the UI's API refuse the browser's requests.
func TestComposeUICORSOriginsAreTheUIs(t *testing.T) {
	ui := composeServices(t)["temporal-ui"]
	if len(ui.Ports) != 1 {
		t.Fatalf("temporal-ui publishes %q, want one port", ui.Ports)
	}
	// "127.0.0.1:8080:8080": the host port is the one a browser opens.
	parts := strings.Split(ui.Ports[0], ":")
	hostPort := parts[len(parts)-2]
	origins := strings.Split(ui.Environment["TEMPORAL_CORS_ORIGINS"], ",")
	if len(origins) == 0 || origins[0] == "" {
		t.Fatal("temporal-ui sets no TEMPORAL_CORS_ORIGINS: the UI would allow only its default origin")
	}
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || u.Scheme != "http" || u.Path != "" || (u.Hostname() != "localhost" && u.Hostname() != "127.0.0.1") || u.Port() != hostPort {
			t.Errorf("TEMPORAL_CORS_ORIGINS has %q; want http://localhost:%s or http://127.0.0.1:%s, the Web UI's published origin", o, hostPort, hostPort)
		}
	}
}

// TestComposeHeaderTurnsOnBuildKit: deploy/Dockerfile's cache mounts need BuildKit, which
// docker-compose 1.x and Docker before 23 use only when asked, so the header's command says so.
func TestComposeHeaderTurnsOnBuildKit(t *testing.T) {
	if !strings.Contains(readFile(t, "deploy/Dockerfile"), "RUN --mount=") {
		t.Skip("deploy/Dockerfile no longer needs BuildKit")
	}
	header := readFile(t, "docker-compose.yml")
	header = header[:strings.Index(header, "\nx-walkeeper-env:")]
	if !strings.Contains(header, "DOCKER_BUILDKIT=1 COMPOSE_DOCKER_CLI_BUILD=1 docker-compose -p walkeeper up --build") {
		t.Error("docker-compose.yml's header does not give the docker-compose 1.x command with DOCKER_BUILDKIT=1 COMPOSE_DOCKER_CLI_BUILD=1")
	}
}
