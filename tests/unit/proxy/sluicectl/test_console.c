/*
 * test_console.c: sluicectl console's server.  The token, the cookie,
 * Host and Origin as pure functions; the route table; the page files;
 * then the real server on an ephemeral loopback port, in this process,
 * in front of a fake control API on a Unix socket (evhttp in the same
 * event loop), driven request by request: what is refused, what is
 * passed on, and what the upstream gets.  The log reader's work
 * (clj_query_text) on a file of its own.
 */
#include "sluice-config.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "proxy/sluicectl/console.h"
#include "proxy/sluicectl/console_log.h"

static int
is_hex64(const char *s)
{
	return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

/* ---- token and cookie ---- */

static void
test_token_once(void **state)
{
	struct console_auth a;
	char tok[65], wrong[65], hdr[256];

	(void)state;
	assert_int_equal(console_auth_init(&a, 8080), 0);
	assert_true(is_hex64(a.token));
	assert_string_equal(a.cookie, "sluice_console_8080");
	assert_string_equal(a.secret, "");
	snprintf(tok, sizeof(tok), "%s", a.token);
	/* nothing opens before the token is used */
	assert_false(console_auth_cookie(&a, "sluice_console_8080="));
	assert_false(console_auth_cookie(&a, NULL));

	snprintf(wrong, sizeof(wrong), "%s", tok);
	wrong[63] = wrong[63] == '0' ? '1' : '0';
	assert_false(console_auth_redeem(&a, wrong));
	assert_false(console_auth_redeem(&a, ""));
	assert_false(console_auth_redeem(&a, NULL));
	wrong[63] = '\0';               /* a prefix */
	assert_false(console_auth_redeem(&a, wrong));
	assert_false(a.token_used);

	assert_true(console_auth_redeem(&a, tok));
	assert_true(a.token_used);
	assert_true(is_hex64(a.secret));
	assert_string_not_equal(a.secret, tok);
	/* one use only */
	assert_false(console_auth_redeem(&a, tok));

	snprintf(hdr, sizeof(hdr), "sluice_console_8080=%s", a.secret);
	assert_true(console_auth_cookie(&a, hdr));
	snprintf(hdr, sizeof(hdr), "a=b; sluice_console_8080=%s; c=d",
	    a.secret);
	assert_true(console_auth_cookie(&a, hdr));
	/* one tossed in by another server on the host does not hide ours */
	snprintf(hdr, sizeof(hdr), "sluice_console_8080=deadbeef; "
	    "sluice_console_8080=%s", a.secret);
	assert_true(console_auth_cookie(&a, hdr));
	/* the token is no cookie, and near misses are none */
	snprintf(hdr, sizeof(hdr), "sluice_console_8080=%s", tok);
	assert_false(console_auth_cookie(&a, hdr));
	snprintf(hdr, sizeof(hdr), "sluice_console_80800=%s", a.secret);
	assert_false(console_auth_cookie(&a, hdr));
	snprintf(hdr, sizeof(hdr), "sluice_console_8081=%s", a.secret);
	assert_false(console_auth_cookie(&a, hdr));
	snprintf(hdr, sizeof(hdr), "sluice_console_8080=%sx", a.secret);
	assert_false(console_auth_cookie(&a, hdr));
	snprintf(hdr, sizeof(hdr), "sluice_console_8080=%.63s", a.secret);
	assert_false(console_auth_cookie(&a, hdr));
	assert_false(console_auth_cookie(&a, "sluice_console_8080"));
}

static void
test_tokens_differ(void **state)
{
	struct console_auth a, b;

	(void)state;
	assert_int_equal(console_auth_init(&a, 1), 0);
	assert_int_equal(console_auth_init(&b, 1), 0);
	assert_string_not_equal(a.token, b.token);
}

static void
test_host_origin(void **state)
{
	static const char *const good[] = { "localhost", "localhost:8080",
	    "LocalHost:1", "127.0.0.1", "127.0.0.1:65535", "[::1]",
	    "[::1]:8080", NULL };
	static const char *const bad[] = { "", "evil.test", "127.0.0.1.evil",
	    "localhost.evil", "127.0.0.2", "127.0.0.1:", "127.0.0.1:123456",
	    "127.0.0.1:80a", "[::1]x", "::1", "[::2]:80", "localhost:8080 ",
	    " localhost", "127.0.0.1:80:80", NULL };
	size_t i;

	(void)state;
	for (i = 0; good[i] != NULL; i++)
		assert_true(console_host_ok(good[i]));
	for (i = 0; bad[i] != NULL; i++) {
		if (console_host_ok(bad[i]))
			fail_msg("Host %s accepted", bad[i]);
	}
	assert_false(console_host_ok(NULL));

	assert_true(console_origin_ok("http://127.0.0.1:8080",
	    "127.0.0.1:8080"));
	assert_true(console_origin_ok("http://localhost:8080",
	    "localhost:8080"));
	assert_true(console_origin_ok("http://[::1]:9", "[::1]:9"));
	/* over an SSH forward the port is the laptop's: Host says it */
	assert_true(console_origin_ok("http://127.0.0.1:8080",
	    "127.0.0.1:8080"));
	assert_false(console_origin_ok("http://127.0.0.1:8081",
	    "127.0.0.1:8080"));
	assert_false(console_origin_ok("https://127.0.0.1:8080",
	    "127.0.0.1:8080"));
	assert_false(console_origin_ok("http://localhost:8080",
	    "127.0.0.1:8080"));
	assert_false(console_origin_ok("null", "127.0.0.1:8080"));
	assert_false(console_origin_ok("http://evil.test", "evil.test"));
	assert_false(console_origin_ok("http://127.0.0.1:8080/",
	    "127.0.0.1:8080"));
	assert_false(console_origin_ok(NULL, "127.0.0.1:8080"));
	assert_false(console_origin_ok("http://127.0.0.1:8080", NULL));
}

/* ---- routes ---- */

static void
expect_route(const char *method, const char *path, const char *upath,
    enum console_upstream up, int body)
{
	const struct console_route *r;
	char got[1024];
	int status = 0;

	r = console_route_find(method, path, got, sizeof(got), &status);
	if (r == NULL)
		fail_msg("%s %s: no route (%d)", method, path, status);
	assert_string_equal(got, upath);
	assert_int_equal(r->up, up);
	assert_int_equal(r->body, body);
}

static void
expect_no_route(const char *method, const char *path, int want)
{
	char got[1024];
	int status = 0;

	if (console_route_find(method, path, got, sizeof(got), &status) !=
	    NULL)
		fail_msg("%s %s: routed", method, path);
	if (status != want)
		fail_msg("%s %s: %d, want %d", method, path, status, want);
}

static void
test_routes(void **state)
{
	char id65[80];

	(void)state;
	expect_route("GET", "/api/sluiced/v1/health", "/v1/health",
	    CUP_SLUICED, 0);
	expect_route("PUT", "/api/sluiced/v1/ceiling", "/v1/ceiling",
	    CUP_SLUICED, 1);
	expect_route("GET", "/api/sluiced/v1/sessions", "/v1/sessions",
	    CUP_SLUICED, 0);
	expect_route("PATCH", "/api/sluiced/v1/sessions/c-1.x_y",
	    "/v1/sessions/c-1.x_y", CUP_SLUICED, 1);
	expect_route("DELETE", "/api/sluiced/v1/sessions/c1", "/v1/sessions/c1",
	    CUP_SLUICED, 0);
	expect_route("DELETE", "/api/sluiced/v1/sessions/c1/grants/pypi.org:443",
	    "/v1/sessions/c1/grants/pypi.org:443", CUP_SLUICED, 0);
	expect_route("DELETE",
	    "/api/sluiced/v1/sessions/c1/grants/%5B2001%3Adb8%3A%3A1%5D:443",
	    "/v1/sessions/c1/grants/%5B2001%3Adb8%3A%3A1%5D:443", CUP_SLUICED,
	    0);
	expect_route("POST", "/api/sluiced/v1/prompts/p-00ff",
	    "/v1/prompts/p-00ff", CUP_SLUICED, 1);
	expect_route("GET", "/api/exec/v1/health", "/v1/health", CUP_EXEC, 0);
	expect_route("GET", "/api/exec/v1/sandboxes/b1/commands",
	    "/v1/sandboxes/b1/commands", CUP_EXEC, 0);
	expect_route("PATCH", "/api/exec/v1/sandboxes/b1", "/v1/sandboxes/b1",
	    CUP_EXEC, 1);

	/* what the pages do not do is not passed on */
	expect_no_route("POST", "/api/sluiced/v1/sessions", 405);
	expect_no_route("PUT", "/api/sluiced/v1/sessions/c1", 405);
	expect_no_route("POST", "/api/sluiced/v1/sessions/c1/grants", 404);
	expect_no_route("GET", "/api/sluiced/v1/metrics", 404);
	expect_no_route("GET", "/api/sluiced/v1/events", 404);
	expect_no_route("POST", "/api/exec/v1/sandboxes/b1/exec", 404);
	expect_no_route("PUT", "/api/exec/v1/sandboxes/b1/files/x", 404);
	expect_no_route("GET", "/api/exec/v1/metrics", 404);
	/* paths are taken as written */
	expect_no_route("GET", "/api/sluiced/v1/sessions/", 404);
	expect_no_route("GET", "/api/sluiced//v1/sessions", 404);
	expect_no_route("GET", "/api/sluiced/v1//sessions", 404);
	expect_no_route("GET", "/api/sluiced/v1/sessions/c1/", 404);
	expect_no_route("GET", "/api/sluiced/v1/sessions/..", 404);
	expect_no_route("GET", "/api/sluiced/v1/sessions/.", 404);
	expect_no_route("GET", "/api/sluiced/v1/sessions/a%2fb", 404);
	expect_no_route("GET", "/api/sluiced/v1/sessions/a b", 404);
	expect_no_route("DELETE", "/api/sluiced/v1/sessions/c1/grants/nocolon",
	    404);
	expect_no_route("DELETE", "/api/sluiced/v1/sessions/c1/grants/a/b:1",
	    404);
	expect_no_route("GET", "/api/other/v1/health", 404);
	expect_no_route("GET", "/api/sluiced", 404);
	expect_no_route("GET", "/v1/health", 404);
	memset(id65, 'a', 65);
	id65[65] = '\0';
	{
		char p[200];
		snprintf(p, sizeof(p), "/api/sluiced/v1/sessions/%s", id65);
		expect_no_route("GET", p, 404);
		id65[64] = '\0';
		snprintf(p, sizeof(p), "/api/sluiced/v1/sessions/%s", id65);
		expect_route("GET", p, p + 12, CUP_SLUICED, 0);
	}
}

static void
test_assets(void **state)
{
	const struct console_asset *a;
	const char *type = NULL;

	(void)state;
	a = console_asset_find("/", &type);
	assert_non_null(a);
	assert_string_equal(a->name, "index.html");
	assert_string_equal(type, "text/html; charset=utf-8");
	assert_non_null(memmem(a->data, a->len, "sluice console", 14));
	a = console_asset_find("/console.js", &type);
	assert_non_null(a);
	assert_string_equal(type, "text/javascript; charset=utf-8");
	/* the script renders data as text, never as markup */
	assert_null(memmem(a->data, a->len, "innerHTML", 9));
	assert_null(memmem(a->data, a->len, "outerHTML", 9));
	assert_null(memmem(a->data, a->len, "insertAdjacentHTML", 18));
	assert_null(memmem(a->data, a->len, "document.write", 14));
	assert_null(memmem(a->data, a->len, "eval(", 5));
	a = console_asset_find("/console.css", &type);
	assert_non_null(a);
	assert_string_equal(type, "text/css; charset=utf-8");
	/* nothing from elsewhere */
	for (a = console_assets; a->name != NULL; a++) {
		if (memmem(a->data, a->len, "https://", 8) != NULL ||
		    memmem(a->data, a->len, "//cdn", 5) != NULL)
			fail_msg("%s names another site", a->name);
	}
	assert_null(console_asset_find("/index.htm", &type));
	assert_null(console_asset_find("/../index.html", &type));
	assert_null(console_asset_find("//index.html", &type));
	assert_null(console_asset_find("index.html", &type));
	assert_null(console_asset_find(NULL, &type));
}

/* ---- the server, in this process ---- */

struct fake {
	struct evhttp *http;
	char method[16];
	char path[256];
	char body[1024];
	int calls;
	int junk;               /* answer with a non-JSON body */
};

static void
fake_cb(struct evhttp_request *req, void *arg)
{
	struct fake *f = arg;
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	struct evbuffer *out = evbuffer_new();
	size_t n = evbuffer_get_length(in);

	f->calls++;
	switch (evhttp_request_get_command(req)) {
	case EVHTTP_REQ_GET: snprintf(f->method, sizeof(f->method), "GET");
		break;
	case EVHTTP_REQ_PATCH: snprintf(f->method, sizeof(f->method),
		    "PATCH"); break;
	case EVHTTP_REQ_PUT: snprintf(f->method, sizeof(f->method), "PUT");
		break;
	case EVHTTP_REQ_DELETE: snprintf(f->method, sizeof(f->method),
		    "DELETE"); break;
	default: snprintf(f->method, sizeof(f->method), "OTHER"); break;
	}
	snprintf(f->path, sizeof(f->path), "%s", evhttp_request_get_uri(req));
	if (n >= sizeof(f->body))
		n = sizeof(f->body) - 1;
	evbuffer_copyout(in, f->body, n);
	f->body[n] = '\0';
	if (f->junk)
		evbuffer_add_printf(out, "<html>not json</html>");
	else if (strcmp(f->path, "/v1/sessions/none") == 0) {
		evbuffer_add_printf(out, "{\"error\":{\"code\":\"not_found\","
		    "\"message\":\"no session none\"}}");
		evhttp_send_reply(req, 404, "Not Found", out);
		evbuffer_free(out);
		return;
	} else
		evbuffer_add_printf(out, "{\"fake\":true,\"path\":\"%s\"}",
		    f->path);
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

struct rig {
	struct event_base *base;
	struct console *con;
	struct fake fake;
	char dir[64];
	char sock[100];
	char log[128];
	int port;
	char cookie[600];        /* "name=value" once signed in */
};

static struct rig rig;

static int
rig_setup(void **state)
{
	struct console_cfg cfg;
	struct sockaddr_un sun;
	char err[256], nosock[160];
	FILE *f;
	int fd;

	(void)state;
	memset(&rig, 0, sizeof(rig));
	snprintf(rig.dir, sizeof(rig.dir), "/tmp/test_console.XXXXXX");
	assert_non_null(mkdtemp(rig.dir));
	snprintf(rig.sock, sizeof(rig.sock), "%s/control.sock", rig.dir);
	snprintf(rig.log, sizeof(rig.log), "%s/conn.jsonl", rig.dir);
	snprintf(nosock, sizeof(nosock), "%s/exec.sock", rig.dir);
	rig.base = event_base_new();
	assert_non_null(rig.base);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", rig.sock);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(fd, 16), 0);
	rig.fake.http = evhttp_new(rig.base);
	evhttp_set_allowed_methods(rig.fake.http, EVHTTP_REQ_GET |
	    EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_POST);
	evhttp_set_gencb(rig.fake.http, fake_cb, &rig.fake);
	assert_non_null(evhttp_accept_socket_with_handle(rig.fake.http, fd));

	f = fopen(rig.log, "w");
	assert_non_null(f);
	fputs("{\"ts\":\"2024-05-01T10:00:00.000Z\",\"seq\":1,\"event\":"
	    "\"decision\",\"session\":\"c1\",\"decision\":\"deny\"}\n", f);
	fclose(f);

	memset(&cfg, 0, sizeof(cfg));
	cfg.socket = rig.sock;
	cfg.exec_socket = nosock;       /* nothing listens there */
	cfg.log = rig.log;
	cfg.port = 0;
	rig.con = console_new(rig.base, &cfg, err, sizeof(err));
	if (rig.con == NULL)
		fail_msg("console_new: %s", err);
	rig.port = console_port(rig.con);
	assert_true(rig.port > 0);
	return 0;
}

static int
rig_teardown(void **state)
{
	char p[200];

	(void)state;
	console_free(rig.con);
	evhttp_free(rig.fake.http);
	event_base_free(rig.base);
	unlink(rig.sock);
	unlink(rig.log);
	snprintf(p, sizeof(p), "%s", rig.dir);
	rmdir(p);
	return 0;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct answer {
	int status;
	char head[4096];
	char *body;
	char raw[65536];
};

/* One request (Connection: close) to the console, the loop run until
 * the console closes.  Bounded by 5 s. */
static void
exchange(const char *req, struct answer *a)
{
	struct sockaddr_in sin;
	size_t len = strlen(req), sent = 0, got = 0;
	int64_t deadline = now_ms() + 5000;
	char *sep;
	ssize_t n;
	int fd;

	memset(a, 0, sizeof(*a));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)rig.port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		assert_int_equal(errno, EINPROGRESS);
	while (now_ms() < deadline) {
		event_base_loop(rig.base, EVLOOP_NONBLOCK);
		if (sent < len) {
			n = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
		}
		n = recv(fd, a->raw + got, sizeof(a->raw) - 1 - got, 0);
		if (n == 0)
			break;
		if (n > 0)
			got += (size_t)n;
		else
			usleep(1000);
	}
	close(fd);
	a->raw[got] = '\0';
	sep = strstr(a->raw, "\r\n\r\n");
	if (sep == NULL)
		fail_msg("no answer to: %.60s (got %zu bytes)", req, got);
	snprintf(a->head, sizeof(a->head), "%.*s", (int)(sep - a->raw),
	    a->raw);
	a->body = sep + 4;
	assert_int_equal(sscanf(a->raw, "HTTP/1.1 %d", &a->status), 1);
}

/* A header's value in a->head (case as written), or NULL. */
static const char *
header(struct answer *a, const char *name, char *buf, size_t buflen)
{
	char pat[80], *p, *e;

	snprintf(pat, sizeof(pat), "\r\n%s: ", name);
	p = strstr(a->head, pat);
	if (p == NULL)
		return NULL;
	p += strlen(pat);
	e = strstr(p, "\r\n");
	snprintf(buf, buflen, "%.*s", e ? (int)(e - p) : (int)strlen(p), p);
	return buf;
}

static void
request(struct answer *a, const char *method, const char *path,
    const char *extra, const char *body)
{
	char req[8192];
	char host[64];

	snprintf(host, sizeof(host), "127.0.0.1:%d", rig.port);
	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: %s\r\n"
	    "Connection: close\r\n%s%s%s%s%s%s%s%zu\r\n\r\n%s", method, path,
	    host, rig.cookie[0] ? "Cookie: " : "", rig.cookie,
	    rig.cookie[0] ? "\r\n" : "", extra ? extra : "",
	    body ? "Content-Type: application/json\r\n" : "",
	    "", "Content-Length: ", body ? strlen(body) : 0,
	    body ? body : "");
	exchange(req, a);
}

static void
assert_hardened(struct answer *a)
{
	char v[512];

	assert_non_null(header(a, "Content-Security-Policy", v, sizeof(v)));
	assert_non_null(strstr(v, "default-src 'self'"));
	assert_non_null(strstr(v, "frame-ancestors 'none'"));
	assert_non_null(header(a, "X-Frame-Options", v, sizeof(v)));
	assert_string_equal(v, "DENY");
	assert_non_null(header(a, "Cache-Control", v, sizeof(v)));
	assert_string_equal(v, "no-store");
	assert_non_null(header(a, "Referrer-Policy", v, sizeof(v)));
	assert_string_equal(v, "no-referrer");
	assert_non_null(header(a, "X-Content-Type-Options", v, sizeof(v)));
}

static void
sign_in(void)
{
	struct answer a;
	char path[128], v[512], *semi;

	snprintf(path, sizeof(path), "/?token=%s", console_token(rig.con));
	request(&a, "GET", path, NULL, NULL);
	assert_int_equal(a.status, 303);
	assert_non_null(header(&a, "Location", v, sizeof(v)));
	assert_string_equal(v, "/");
	assert_non_null(header(&a, "Set-Cookie", v, sizeof(v)));
	assert_non_null(strstr(v, "; HttpOnly"));
	assert_non_null(strstr(v, "; SameSite=Strict"));
	assert_non_null(strstr(v, "; Path=/"));
	assert_true(strncmp(v, "sluice_console_", 15) == 0);
	semi = strchr(v, ';');
	assert_non_null(semi);
	*semi = '\0';
	snprintf(rig.cookie, sizeof(rig.cookie), "%s", v);
}

static void
test_server_signin(void **state)
{
	struct answer a;
	char path[128], saved[600];

	(void)state;
	rig.cookie[0] = '\0';
	/* no token, no cookie: no data, no API */
	request(&a, "GET", "/", NULL, NULL);
	assert_int_equal(a.status, 403);
	assert_hardened(&a);
	assert_null(strstr(a.body, "console.js"));
	request(&a, "GET", "/console.js", NULL, NULL);
	assert_int_equal(a.status, 403);
	request(&a, "GET", "/api/sluiced/v1/sessions", NULL, NULL);
	assert_int_equal(a.status, 403);
	assert_int_equal(rig.fake.calls, 0);
	request(&a, "GET", "/?token=00112233", NULL, NULL);
	assert_int_equal(a.status, 403);
	/* the token is taken on a GET only */
	snprintf(path, sizeof(path), "/?token=%s", console_token(rig.con));
	request(&a, "HEAD", path, NULL, NULL);
	assert_int_equal(a.status, 403);

	sign_in();
	/* the token is used up: again, without the cookie, it is refused */
	snprintf(saved, sizeof(saved), "%s", rig.cookie);
	rig.cookie[0] = '\0';
	request(&a, "GET", path, NULL, NULL);
	assert_int_equal(a.status, 403);
	/* with the cookie, it just goes to "/" */
	snprintf(rig.cookie, sizeof(rig.cookie), "%s", saved);
	request(&a, "GET", path, NULL, NULL);
	assert_int_equal(a.status, 303);

	request(&a, "GET", "/", NULL, NULL);
	assert_int_equal(a.status, 200);
	assert_hardened(&a);
	assert_non_null(strstr(a.body, "<script src=\"/console.js\""));
	request(&a, "GET", "/console.css", NULL, NULL);
	assert_int_equal(a.status, 200);
	request(&a, "GET", "/nothing.html", NULL, NULL);
	assert_int_equal(a.status, 404);
	request(&a, "GET", "/api/console", NULL, NULL);
	assert_int_equal(a.status, 200);
	assert_non_null(strstr(a.body, rig.sock));

	/* a cookie of another value is no session */
	snprintf(rig.cookie, sizeof(rig.cookie), "%.*s0", (int)strcspn(saved,
	    "=") + 1, saved);
	request(&a, "GET", "/api/console", NULL, NULL);
	assert_int_equal(a.status, 403);
	snprintf(rig.cookie, sizeof(rig.cookie), "%s", saved);
}

static void
test_server_host_origin(void **state)
{
	struct answer a;
	char req[1024], origin[128];
	int calls;

	(void)state;
	if (rig.cookie[0] == '\0')
		sign_in();
	/* a name that resolved to us (DNS rebinding) */
	snprintf(req, sizeof(req), "GET /api/console HTTP/1.1\r\nHost: "
	    "evil.test:%d\r\nCookie: %s\r\nConnection: close\r\n\r\n",
	    rig.port, rig.cookie);
	exchange(req, &a);
	assert_int_equal(a.status, 403);
	snprintf(req, sizeof(req), "GET /api/console HTTP/1.1\r\n"
	    "Cookie: %s\r\nConnection: close\r\n\r\n", rig.cookie);
	exchange(req, &a);
	assert_true(a.status == 403 || a.status == 400);

	calls = rig.fake.calls;
	/* a change without an Origin, or from another one */
	request(&a, "PATCH", "/api/sluiced/v1/sessions/c1", NULL,
	    "{\"tier\":\"off\"}");
	assert_int_equal(a.status, 403);
	assert_non_null(strstr(a.body, "Origin"));
	request(&a, "PATCH", "/api/sluiced/v1/sessions/c1",
	    "Origin: http://evil.test\r\n", "{\"tier\":\"off\"}");
	assert_int_equal(a.status, 403);
	snprintf(origin, sizeof(origin), "Origin: http://127.0.0.1:%d\r\n",
	    rig.port + 1);
	request(&a, "PATCH", "/api/sluiced/v1/sessions/c1", origin,
	    "{\"tier\":\"off\"}");
	assert_int_equal(a.status, 403);
	request(&a, "PATCH", "/api/sluiced/v1/sessions/c1",
	    "Origin: null\r\n", "{\"tier\":\"off\"}");
	assert_int_equal(a.status, 403);
	/* a read from another origin too */
	request(&a, "GET", "/api/sluiced/v1/sessions",
	    "Origin: http://127.0.0.1:1\r\n", NULL);
	assert_int_equal(a.status, 403);
	/* a browser's own word that the call comes from elsewhere */
	request(&a, "GET", "/api/sluiced/v1/sessions",
	    "Sec-Fetch-Site: same-site\r\n", NULL);
	assert_int_equal(a.status, 403);
	assert_int_equal(rig.fake.calls, calls);

	/* the same change from the console's own origin goes through */
	snprintf(origin, sizeof(origin), "Origin: http://127.0.0.1:%d\r\n"
	    "Sec-Fetch-Site: same-origin\r\n", rig.port);
	request(&a, "PATCH", "/api/sluiced/v1/sessions/c1", origin,
	    "{\"tier\":\"off\"}");
	assert_int_equal(a.status, 200);
	assert_int_equal(rig.fake.calls, calls + 1);
	assert_string_equal(rig.fake.method, "PATCH");
	assert_string_equal(rig.fake.path, "/v1/sessions/c1");
	assert_string_equal(rig.fake.body, "{\"tier\":\"off\"}");
	assert_non_null(strstr(a.body, "\"fake\":true"));
}

static void
test_server_routing(void **state)
{
	struct answer a;
	char origin[128], req[1024];
	int calls;

	(void)state;
	if (rig.cookie[0] == '\0')
		sign_in();
	snprintf(origin, sizeof(origin), "Origin: http://127.0.0.1:%d\r\n",
	    rig.port);
	calls = rig.fake.calls;
	request(&a, "GET", "/api/sluiced/v1/sessions", NULL, NULL);
	assert_int_equal(a.status, 200);
	assert_string_equal(rig.fake.method, "GET");
	assert_string_equal(rig.fake.path, "/v1/sessions");
	/* the API's own refusal comes through as it is */
	request(&a, "GET", "/api/sluiced/v1/sessions/none", NULL, NULL);
	assert_int_equal(a.status, 404);
	assert_non_null(strstr(a.body, "no session none"));
	assert_int_equal(rig.fake.calls, calls + 2);

	/* not in the table, not passed on */
	request(&a, "GET", "/api/sluiced/v1/metrics", NULL, NULL);
	assert_int_equal(a.status, 404);
	request(&a, "POST", "/api/sluiced/v1/sessions", origin,
	    "{\"id\":\"x\"}");
	assert_int_equal(a.status, 405);
	request(&a, "GET", "/api/sluiced/v1/sessions?x=1", NULL, NULL);
	assert_int_equal(a.status, 400);
	/* a body must be one JSON object, of the JSON type */
	request(&a, "PUT", "/api/sluiced/v1/ceiling", origin, "[1]");
	assert_int_equal(a.status, 400);
	request(&a, "PUT", "/api/sluiced/v1/ceiling", origin,
	    "{\"tier\":\"off\"} x");
	assert_int_equal(a.status, 400);
	snprintf(req, sizeof(req), "PUT /api/sluiced/v1/ceiling HTTP/1.1\r\n"
	    "Host: 127.0.0.1:%d\r\nCookie: %s\r\n%sContent-Type: text/plain"
	    "\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", rig.port,
	    rig.cookie, origin);
	exchange(req, &a);
	assert_int_equal(a.status, 415);
	request(&a, "DELETE", "/api/sluiced/v1/sessions/c1", origin, "{}");
	assert_int_equal(a.status, 400);
	assert_int_equal(rig.fake.calls, calls + 2);

	/* no executor: its calls fail, sluiced's do not */
	request(&a, "GET", "/api/exec/v1/health", NULL, NULL);
	assert_int_equal(a.status, 502);
	assert_non_null(strstr(a.body, "\"unreachable\""));

	/* an upstream that answers something not JSON */
	rig.fake.junk = 1;
	request(&a, "GET", "/api/sluiced/v1/health", NULL, NULL);
	rig.fake.junk = 0;
	assert_int_equal(a.status, 502);
	assert_null(strstr(a.body, "<html>"));

	request(&a, "GET", "/api/reasons", NULL, NULL);
	assert_int_equal(a.status, 200);
	assert_non_null(strstr(a.body, "\"above_ceiling\""));
	request(&a, "POST", "/api/reasons", origin, "{}");
	assert_int_equal(a.status, 405);
}

static void
test_server_log(void **state)
{
	struct answer a;
	int64_t deadline;

	(void)state;
	if (rig.cookie[0] == '\0')
		sign_in();
	request(&a, "GET", "/api/log?session=c1&decision=deny", NULL, NULL);
	assert_int_equal(a.status, 200);
	assert_non_null(strstr(a.body, "\"matched\":1"));
	request(&a, "GET", "/api/log?session=c2", NULL, NULL);
	assert_int_equal(a.status, 200);
	assert_non_null(strstr(a.body, "\"matched\":0"));
	request(&a, "GET", "/api/log?since=yesterday", NULL, NULL);
	assert_int_equal(a.status, 400);
	request(&a, "GET", "/api/log?limit=0", NULL, NULL);
	assert_int_equal(a.status, 400);
	request(&a, "GET", "/api/log?what=1", NULL, NULL);
	assert_int_equal(a.status, 400);
	request(&a, "GET", "/api/log/verify", NULL, NULL);
	assert_int_equal(a.status, 200);
	/* the hand-made record has no chain */
	assert_non_null(strstr(a.body, "\"ok\":false"));
	/* let the children's pipes close */
	deadline = now_ms() + 200;
	while (now_ms() < deadline)
		event_base_loop(rig.base, EVLOOP_NONBLOCK);
}

/* ---- the log reader's work ---- */

static void
test_log_query_text(void **state)
{
	char dir[] = "/tmp/test_console_log.XXXXXX", path[128];
	struct ctlog_filter f;
	json_t *doc, *recs;
	char *text;
	FILE *fp;
	int status, i;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/log", dir);
	fp = fopen(path, "w");
	assert_non_null(fp);
	for (i = 1; i <= 30; i++)
		fprintf(fp, "{\"ts\":\"2024-05-01T10:%02d:00.000Z\",\"seq\":%d,"
		    "\"event\":\"decision\",\"session\":\"%s\",\"decision\":"
		    "\"%s\",\"reason\":\"%s\"}\n", i, i, i % 2 ? "odd" : "even",
		    i % 3 ? "allow" : "deny", i % 3 ? "" : "above_ceiling");
	fputs("not json\n{\"unterminated\":\n\n", fp);
	fclose(fp);

	memset(&f, 0, sizeof(f));
	f.session = "odd";
	f.decision = "deny";
	text = clj_query_text(path, &f, 3, &status);
	assert_int_equal(status, 200);
	doc = json_loads(text, 0, NULL);
	assert_non_null(doc);
	/* odd multiples of 3 up to 30: 3 9 15 21 27; the newest three */
	assert_int_equal(json_integer_value(json_object_get(doc, "matched")),
	    5);
	assert_int_equal(json_integer_value(json_object_get(doc, "bad_lines")),
	    2);
	recs = json_object_get(doc, "records");
	assert_int_equal(json_array_size(recs), 3);
	assert_int_equal(json_integer_value(json_object_get(
	    json_array_get(recs, 0), "seq")), 15);
	assert_int_equal(json_integer_value(json_object_get(
	    json_array_get(recs, 2), "seq")), 27);
	json_decref(doc);
	free(text);

	memset(&f, 0, sizeof(f));
	f.since = "2024-05-01T10:28";
	f.until = "2024-05-01T10:29";
	text = clj_query_text(path, &f, 100, &status);
	assert_int_equal(status, 200);
	doc = json_loads(text, 0, NULL);
	assert_int_equal(json_integer_value(json_object_get(doc, "matched")),
	    2);
	json_decref(doc);
	free(text);

	f.since = f.until = NULL;
	f.reason = "above_ceiling";
	text = clj_query_text(path, &f, CLJ_LIMIT_MAX * 10, &status);
	assert_int_equal(status, 200);
	doc = json_loads(text, 0, NULL);
	assert_int_equal(json_integer_value(json_object_get(doc, "limit")),
	    CLJ_LIMIT_MAX);
	assert_int_equal(json_array_size(json_object_get(doc, "records")), 10);
	json_decref(doc);
	free(text);

	unlink(path);
	text = clj_query_text(path, &f, 10, &status);
	assert_int_equal(status, 404);
	assert_non_null(strstr(text, "not_found"));
	free(text);
	rmdir(dir);
}

int
main(void)
{
	const struct CMUnitTest pure[] = {
		cmocka_unit_test(test_token_once),
		cmocka_unit_test(test_tokens_differ),
		cmocka_unit_test(test_host_origin),
		cmocka_unit_test(test_routes),
		cmocka_unit_test(test_assets),
		cmocka_unit_test(test_log_query_text),
	};
	const struct CMUnitTest server[] = {
		cmocka_unit_test(test_server_signin),
		cmocka_unit_test(test_server_host_origin),
		cmocka_unit_test(test_server_routing),
		cmocka_unit_test(test_server_log),
	};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	rc = cmocka_run_group_tests(pure, NULL, NULL);
	rc += cmocka_run_group_tests(server, rig_setup, rig_teardown);
	return rc;
}
