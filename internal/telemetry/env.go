package telemetry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"teamsbot/internal/netaddr"
	"teamsbot/internal/textclip"
)

// Config is what the standard OTEL_* variables say about the service's
// traces, read once and checked (Load). The zero Config is tracing off.
type Config struct {
	// Off says in words why tracing is off; "" when it is on.
	Off string
	// Endpoint is the URL the spans are posted to: the traces endpoint as
	// it was given, or the base endpoint with v1/traces appended.
	Endpoint string
	// Headers go with every export; they often hold a collector's API
	// key, so they are never printed or logged.
	Headers map[string]string
	// Timeout bounds one export, retries included.
	Timeout time.Duration
	// Gzip compresses each export.
	Gzip bool
	// TLS is the exporter's TLS configuration: the system's roots, or
	// the certificate file's, and the client certificate when one is set.
	TLS *tls.Config
	// ServiceName is service.name; Resource the other attributes of
	// OTEL_RESOURCE_ATTRIBUTES, in order, service.name left out.
	ServiceName string
	Resource    []attribute.KeyValue
	// Sampler names the sampler (OTEL_TRACES_SAMPLER's values) and
	// SamplerArg its ratio, for the ratio-based ones.
	Sampler    string
	SamplerArg float64
	// The batch span processor: how long spans wait to be sent together,
	// how long one export may take, how many spans may wait (more are
	// dropped) and how many go in one export.
	BatchDelay, ExportTimeout time.Duration
	MaxQueue, MaxBatch        int
}

// Variable is one standard variable the service reads, or a pair of them:
// the one for every signal and the one for traces alone, which wins when
// both are set (the OTLP exporter's configuration options come in such
// pairs).
type Variable struct {
	// Names are the variable, then its traces-only form when it has one.
	Names []string
	// Default is the value an unset variable takes, as it would be typed;
	// Unset says in words what unset means when that is not one value.
	Default, Unset string
	// Secret values are never printed or logged.
	Secret bool
	// Help says what the variable does, in one line.
	Help string
	// parse reads the value (Default when unset) into c; what it says
	// follows the variable's name.
	parse func(c *Config, v string, getenv func(string) string) error
}

// Name is the variable's name, or both names of a pair.
func (v Variable) Name() string { return strings.Join(v.Names, ", ") }

// The protocol the service exports with: the only one it speaks.
const protocolHTTPProtobuf = "http/protobuf"

// DefaultServiceName is service.name when OTEL_SERVICE_NAME does not say.
const DefaultServiceName = "teamsbot"

// Variables lists every standard variable the service reads, in the order
// of the table in docs/configuration.md.
func Variables() []Variable {
	return []Variable{
		{Names: []string{"OTEL_SDK_DISABLED"}, Default: "false", Help: "true turns traces off whatever else is set",
			parse: func(c *Config, v string, _ func(string) string) error {
				off, err := parseBool(v)
				if off {
					c.Off = "OTEL_SDK_DISABLED is true"
				}
				return err
			}},
		{Names: []string{"OTEL_TRACES_EXPORTER"}, Default: "otlp", Help: "otlp, or none to turn traces off",
			parse: func(c *Config, v string, _ func(string) string) error {
				switch strings.ToLower(v) {
				case "otlp":
					return nil
				case "none":
					if c.Off == "" {
						c.Off = "OTEL_TRACES_EXPORTER is none"
					}
					return nil
				}
				return fmt.Errorf("%q: the service exports traces with otlp only (or none: no traces)", textclip.Clip(v, 64))
			}},
		{Names: []string{"OTEL_EXPORTER_OTLP_ENDPOINT"}, Unset: "empty: no traces", Help: "the collector's base URL; traces go to its v1/traces",
			parse: func(c *Config, v string, getenv func(string) string) error {
				if v == "" {
					return nil
				}
				u, err := endpointURL(v)
				if err != nil {
					return err
				}
				if value(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
					// "v1/traces" relative to the base's path, whether or
					// not that path ends with a slash.
					u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
					c.Endpoint = u.String()
				}
				return nil
			}},
		{Names: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}, Unset: "empty: the base URL's v1/traces", Help: "the URL traces are posted to, used as it is",
			parse: func(c *Config, v string, _ func(string) string) error {
				if v == "" {
					return nil
				}
				u, err := endpointURL(v)
				if err != nil {
					return err
				}
				if u.Path == "" {
					u.Path = "/"
				}
				c.Endpoint = u.String()
				return nil
			}},
		{Names: []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"}, Default: protocolHTTPProtobuf, Help: "http/protobuf, the only protocol the service speaks",
			parse: func(_ *Config, v string, _ func(string) string) error {
				if v != protocolHTTPProtobuf {
					return fmt.Errorf("%q: the service exports with http/protobuf only (OTLP over HTTP, port 4318 of a collector); grpc and http/json are not supported", textclip.Clip(v, 64))
				}
				return nil
			}},
		{Names: []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}, Secret: true, Help: "headers of every export, key=value pairs separated by commas, values percent-encoded",
			parse: func(c *Config, v string, _ func(string) string) (err error) {
				c.Headers, err = parseHeaders(v)
				return err
			}},
		{Names: []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"}, Default: "10000", Help: "milliseconds one export may take, retries included",
			parse: func(c *Config, v string, _ func(string) string) (err error) {
				c.Timeout, err = parseTimeout(v)
				return err
			}},
		{Names: []string{"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"}, Default: "none", Help: "gzip compresses each export",
			parse: func(c *Config, v string, _ func(string) string) error {
				switch strings.ToLower(v) {
				case "gzip":
					c.Gzip = true
				case "none":
				default:
					return fmt.Errorf("%q: want gzip or none", textclip.Clip(v, 64))
				}
				return nil
			}},
		{Names: []string{"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"}, Unset: "empty: the system's", Help: "a PEM file of the certificates that may sign an https collector's",
			parse: func(c *Config, v string, _ func(string) string) error {
				if v == "" {
					return nil
				}
				pem, err := os.ReadFile(v)
				if err != nil {
					return fmt.Errorf("%s: cannot be read: %w", v, errors.Unwrap(err))
				}
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM(pem) {
					return fmt.Errorf("%s: holds no PEM certificate", v)
				}
				c.TLS.RootCAs = pool
				return nil
			}},
		{Names: []string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE"}, Help: "a PEM file of the service's client certificate, for a collector that asks for one (with the key below)",
			parse: func(c *Config, v string, getenv func(string) string) error {
				key := pairValue(getenv, "OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY")
				switch {
				case v == "" && key == "":
					return nil
				case v == "" || key == "":
					return errors.New("the client certificate and its key (OTEL_EXPORTER_OTLP_CLIENT_KEY) are set together")
				}
				cert, err := tls.LoadX509KeyPair(v, key)
				if err != nil {
					return fmt.Errorf("%s and its key: %w", v, err)
				}
				c.TLS.Certificates = []tls.Certificate{cert}
				return nil
			}},
		{Names: []string{"OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"}, Help: "the PEM file of the client certificate's private key (read with the certificate)",
			parse: func(*Config, string, func(string) string) error { return nil }},
		{Names: []string{"OTEL_SERVICE_NAME"}, Default: DefaultServiceName, Help: "service.name of every span; it wins over a service.name in OTEL_RESOURCE_ATTRIBUTES",
			parse: func(c *Config, v string, _ func(string) string) error {
				c.ServiceName = v
				return nil
			}},
		{Names: []string{"OTEL_RESOURCE_ATTRIBUTES"}, Help: "more resource attributes, key=value pairs separated by commas, values percent-encoded",
			parse: func(c *Config, v string, getenv func(string) string) error {
				pairs, err := parsePairs(v)
				if err != nil {
					return err
				}
				for _, p := range pairs {
					if p[0] == "service.name" {
						if value(getenv, "OTEL_SERVICE_NAME") == "" {
							c.ServiceName = p[1]
						}
						continue
					}
					c.Resource = append(c.Resource, attribute.String(p[0], p[1]))
				}
				return nil
			}},
		{Names: []string{"OTEL_TRACES_SAMPLER"}, Default: "parentbased_always_on", Help: "always_on, always_off, traceidratio, or parentbased_ before one of them",
			parse: func(c *Config, v string, _ func(string) string) error {
				c.Sampler = strings.ToLower(v)
				if !slices.Contains(samplers, c.Sampler) {
					return fmt.Errorf("%q: want one of %s", textclip.Clip(v, 64), strings.Join(samplers, ", "))
				}
				return nil
			}},
		{Names: []string{"OTEL_TRACES_SAMPLER_ARG"}, Default: "1.0", Help: "the ratio of traces kept by traceidratio and parentbased_traceidratio, from 0 to 1",
			parse: func(c *Config, v string, _ func(string) string) error {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || f < 0 || f > 1 {
					return fmt.Errorf("%q: want a ratio from 0 to 1, such as 0.25", textclip.Clip(v, 64))
				}
				c.SamplerArg = f
				return nil
			}},
		{Names: []string{"OTEL_BSP_SCHEDULE_DELAY"}, Default: "5000", Help: "milliseconds finished spans wait, at most, to go in one export",
			parse: func(c *Config, v string, _ func(string) string) (err error) {
				c.BatchDelay, err = parseMillis(v, false)
				return err
			}},
		{Names: []string{"OTEL_BSP_EXPORT_TIMEOUT"}, Default: "30000", Help: "milliseconds the batch processor gives one export",
			parse: func(c *Config, v string, _ func(string) string) (err error) {
				c.ExportTimeout, err = parseTimeout(v)
				return err
			}},
		{Names: []string{"OTEL_BSP_MAX_QUEUE_SIZE"}, Default: "2048", Help: "spans that may wait to be exported; more are dropped",
			parse: func(c *Config, v string, _ func(string) string) (err error) {
				c.MaxQueue, err = parseCount(v)
				return err
			}},
		{Names: []string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE"}, Default: "512", Help: "spans in one export, at most OTEL_BSP_MAX_QUEUE_SIZE",
			parse: func(c *Config, v string, _ func(string) string) (err error) {
				c.MaxBatch, err = parseCount(v)
				return err
			}},
	}
}

// samplers are the values of OTEL_TRACES_SAMPLER the service takes: the
// specification's own samplers (Jaeger's and X-Ray's remote ones need
// their services, and are not built in).
var samplers = []string{"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

// value is a variable's value, trimmed; "" when unset. The specification
// reads an empty variable as an unset one.
func value(getenv func(string) string, name string) string {
	return strings.TrimSpace(getenv(name))
}

// pairValue is the value of a pair of variables: the traces-only one
// when it is set, else the one for every signal.
func pairValue(getenv func(string) string, generic, traces string) string {
	if v := value(getenv, traces); v != "" {
		return v
	}
	return value(getenv, generic)
}

// Source is the name of the variable a Variable's value comes from: the
// traces-only one when it is set, else the first.
func (v Variable) Source(getenv func(string) string) string {
	for _, n := range slices.Backward(v.Names) {
		if value(getenv, n) != "" {
			return n
		}
	}
	return v.Names[0]
}

// Load reads the variables through getenv and checks each, reporting
// every mistake at once, each starting with its variable's name and
// never quoting a secret. Traces are off when no endpoint is set, when
// OTEL_SDK_DISABLED is true or when OTEL_TRACES_EXPORTER is none; the
// variables are checked all the same, so that a mistake shows before the
// day tracing is turned on.
//
// The service is stricter than the specification, which ignores a value
// it cannot read with a warning: here it is a mistake, and the service
// does not start with it. Its traces are off unless an endpoint is set,
// where the specification would send them to localhost:4318.
func Load(getenv func(string) string) (Config, []error) {
	c := Config{TLS: &tls.Config{MinVersion: tls.VersionTLS12}}
	var errs []error
	for _, v := range Variables() {
		src := v.Source(getenv)
		val := value(getenv, src)
		if val == "" {
			val = v.Default
		}
		if err := v.parse(&c, val, getenv); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", src, err))
		}
	}
	if c.MaxBatch > c.MaxQueue && value(getenv, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE") != "" {
		errs = append(errs, fmt.Errorf("OTEL_BSP_MAX_EXPORT_BATCH_SIZE: %d is more than OTEL_BSP_MAX_QUEUE_SIZE (%d): an export takes its spans from the queue", c.MaxBatch, c.MaxQueue))
	}
	c.MaxBatch = min(c.MaxBatch, c.MaxQueue)
	if strings.HasPrefix(c.Endpoint, "http://") {
		// TLS has no meaning there, and the exporter refuses it.
		for _, v := range Variables() {
			if src := v.Source(getenv); strings.Contains(src, "CERTIFICATE") && value(getenv, src) != "" {
				errs = append(errs, fmt.Errorf("%s: the collector's endpoint is http://, which has no TLS: a certificate is for an https:// endpoint", src))
			}
		}
	}
	if c.Off == "" && c.Endpoint == "" {
		c.Off = "no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	}
	if len(errs) > 0 {
		return Config{Off: "the OTEL_ variables have mistakes"}, errs
	}
	if c.Off != "" {
		// Nothing of what was read is kept: tracing is off.
		return Config{Off: c.Off}, nil
	}
	return c, nil
}

// Unread names each OTEL_ variable of names that the service does not
// read: another program's (an SDK's metrics or logs), or one of the
// specification's the service has no use for. Such a variable is not a
// mistake, as a platform may set it for every container, but it does
// nothing here, which the start-up log says.
func Unread(names []string) []string {
	var read []string
	for _, v := range Variables() {
		read = append(read, v.Names...)
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "OTEL_") && !slices.Contains(read, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// endpointURL checks a collector's URL: absolute http or https, no user
// info (credentials go in the headers), no query or fragment, which
// OTLP/HTTP would not send. Its errors show the scheme and host only.
func endpointURL(v string) (*url.URL, error) {
	u, err := netaddr.ParseURL(v)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), netaddr.ErrInvalid.Error()+": "))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s://%s: a query or fragment is not sent to the collector; give credentials in OTEL_EXPORTER_OTLP_HEADERS", u.Scheme, u.Host)
	}
	return u, nil
}

// parseBool reads the specification's Boolean: true or false, in any case.
// The specification takes any other value as false with a warning; here
// it is a mistake.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%q: want true or false", textclip.Clip(v, 64))
}

// maxInt is the largest integer the specification asks implementations to
// take (2³¹ − 1).
const maxInt = 1<<31 - 1

// parseMillis reads a duration in whole milliseconds; zero only when
// zeroOK.
func parseMillis(v string, zeroOK bool) (time.Duration, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxInt || (n == 0 && !zeroOK) {
		least := 1
		if zeroOK {
			least = 0
		}
		return 0, fmt.Errorf("%q: want whole milliseconds from %d to %d, such as 10000 for 10 seconds", textclip.Clip(v, 64), least, maxInt)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// parseTimeout reads the specification's Timeout: milliseconds, zero
// meaning no limit, which is taken as the longest it allows.
func parseTimeout(v string) (time.Duration, error) {
	d, err := parseMillis(v, true)
	if err == nil && d == 0 {
		d = maxInt * time.Millisecond
	}
	return d, err
}

// parseCount reads a positive whole number.
func parseCount(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxInt {
		return 0, fmt.Errorf("%q: want a whole number from 1 to %d", textclip.Clip(v, 64), maxInt)
	}
	return n, nil
}

// parsePairs reads key=value pairs separated by commas, each key and value
// percent-decoded and trimmed (the W3C Baggage form the specification
// gives OTEL_RESOURCE_ATTRIBUTES and the exporter's headers, without
// properties). Its errors name the pair by its place, never its value,
// as the pairs may be secrets.
func parsePairs(v string) ([][2]string, error) {
	var out [][2]string
	if v == "" {
		return nil, nil
	}
	for i, p := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("pair %d is not key=value: want key=value pairs separated by commas", i+1)
		}
		dk, err1 := url.PathUnescape(k)
		dv, err2 := url.PathUnescape(strings.TrimSpace(val))
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("pair %d has a %% that starts no percent-encoded byte", i+1)
		}
		out = append(out, [2]string{dk, dv})
	}
	return out, nil
}

// parseHeaders reads the exporter's headers: parsePairs, each key a valid
// header name and each value free of line breaks.
func parseHeaders(v string) (map[string]string, error) {
	pairs, err := parsePairs(v)
	if err != nil || len(pairs) == 0 {
		return nil, err
	}
	h := make(map[string]string, len(pairs))
	for i, p := range pairs {
		if !validHeaderName(p[0]) {
			return nil, fmt.Errorf("pair %d: the key is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", i+1)
		}
		if strings.ContainsAny(p[1], "\r\n\x00") {
			return nil, fmt.Errorf("pair %d: the value holds a line break", i+1)
		}
		h[p[0]] = p[1]
	}
	return h, nil
}

// validHeaderName reports an HTTP field name (RFC 9110's token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}
