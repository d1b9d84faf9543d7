#include "lab/server_process.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "core/error.h"

extern char** environ;

namespace kc {

namespace {

// The live server's process group (one at a time), read by the signal handler and the exit hook.
std::atomic<pid_t> g_group{-1};
std::atomic<int> g_stop_ms{30000};
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[3];
bool g_handlers = false;

void sleep_ms(long ms) {
  timespec t{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) == -1 && errno == EINTR) {
  }
}

// Reaps every exited child (kerncheck is the servers' subreaper, so the engine's orphaned workers are its
// children too) and says whether any process of group g is left.
bool group_left(pid_t g) {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  return !(kill(-g, 0) == -1 && errno == ESRCH);
}

// SIGTERM to the group, up to ms for it to go, then SIGKILL. Async-signal-safe (the handler calls it).
void stop_group(pid_t g, int ms) {
  if (g <= 0) return;
  kill(-g, SIGTERM);
  for (int waited = 0; waited < ms && group_left(g); waited += 50) sleep_ms(50);
  if (group_left(g)) {
    kill(-g, SIGKILL);
    for (int waited = 0; waited < 5000 && group_left(g); waited += 50) sleep_ms(50);
  }
}

void on_signal(int sig) {
  const int saved = errno;
  stop_group(g_group.exchange(-1), g_stop_ms.load());
  for (int i = 0; i < 3; ++i)
    if (kSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
  errno = saved;
  raise(sig);  // what the signal would have done to kerncheck (the previous disposition)
}

void at_exit() { stop_group(g_group.exchange(-1), g_stop_ms.load()); }

void install_handlers() {
  if (g_handlers) return;
  g_handlers = true;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) {
    sigaction(kSignals[i], nullptr, &g_previous[i]);
    // An ignored signal stays ignored (a shell's background job ignores SIGINT): it never ends kerncheck.
    if (g_previous[i].sa_handler != SIG_IGN) sigaction(kSignals[i], &sa, nullptr);
  }
  std::atexit(at_exit);
}

std::size_t on_body(char* p, std::size_t size, std::size_t n, void* user) {
  auto* s = static_cast<std::string*>(user);
  if (s->size() < (1u << 20)) s->append(p, size * n);
  return size * n;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

bool port_is_free(const std::string& host, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // As a server binds (SO_REUSEADDR): connections of a server that just ended (TIME_WAIT) do not hold the
  // port, a listening socket does.
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

int free_port(const std::string& host) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  if (!port) fail("{}: port: expected a free port from the system, got none ({})", host, std::strerror(errno));
  return port;
}

long http_get(const std::string& url, double timeout_s, std::string* body) {
  static const bool init = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)init;
  CURL* c = curl_easy_init();
  if (!c) return 0;
  std::string sink;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");  // the server is ours, on this machine
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, body ? body : &sink);
  long code = 0;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(c);
  return code;
}

ServerProcess::ServerProcess(const ServerSpec& spec) : spec_(spec) {
  if (spec_.argv.empty()) fail("{}: command: expected a program to start, got an empty command", spec_.name);
  if (g_group.load() > 0)
    fail("{}: server: expected one server at a time, got a second start while process group {} runs", spec_.name,
         g_group.load());
  if (!port_is_free(spec_.host, spec_.port))
    fail("{}: port: expected {}:{} to be free before the server starts, got a port in use (another server "
         "listens there: stop it, or give the plan another port)",
         spec_.name, spec_.host, spec_.port);
  const int log = open(spec_.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) fail("{}: log: expected a writable file, got {}", spec_.log, std::strerror(errno));
  // Everything the child needs is built before fork (after it, only async-signal-safe calls).
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (!spec_.env.count(kv.substr(0, kv.find('=')))) envs.push_back(kv);
  }
  for (auto& [k, v] : spec_.env) envs.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec_.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Orphaned workers of the engine become kerncheck's children, so stop() can wait for every one of them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  install_handlers();
  g_stop_ms = static_cast<int>(spec_.stop_timeout_s * 1000);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log);
    fail("{}: fork: expected a new process, got {}", spec_.name, std::strerror(errno));
  }
  if (pid == 0) {
    setsid();                               // its own session and process group: stopped as one
    prctl(PR_SET_PDEATHSIG, SIGTERM);       // kerncheck killed outright: the server is told to go too
    if (getppid() != parent) _exit(127);    // kerncheck died before the line above
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(devnull, 0), dup2(log, 1), dup2(log, 2);
    execvpe(argv[0], argv.data(), envp.data());
    const char* m = "kerncheck: could not start the server command: ";
    (void)!write(2, m, std::strlen(m));
    (void)!write(2, argv[0], std::strlen(argv[0]));
    (void)!write(2, "\n", 1);
    _exit(127);
  }
  close(log);
  if (devnull >= 0) close(devnull);
  pid_ = pid;
  g_group = pid;
}

ServerProcess::~ServerProcess() { stop(); }

void ServerProcess::reap(bool block) {
  if (reaped_ || pid_ <= 0) return;
  int st = 0;
  const pid_t r = waitpid(pid_, &st, block ? 0 : WNOHANG);
  if (r == pid_) status_ = st, reaped_ = true;
  if (r < 0 && errno == ECHILD) reaped_ = true;  // reaped elsewhere (group_left)
}

bool ServerProcess::alive() {
  reap(false);
  return pid_ > 0 && !reaped_;
}

std::string ServerProcess::exit_status() {
  if (alive()) return "running";
  if (WIFEXITED(status_)) return fmt::format("exit code {}", WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) return fmt::format("killed by signal {}", WTERMSIG(status_));
  return "exited";
}

std::string ServerProcess::log_tail(int lines) const {
  std::ifstream in(spec_.log);
  std::deque<std::string> last;
  for (std::string l; std::getline(in, l);) {
    last.push_back(l);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string s;
  for (auto& l : last) s += "\n    " + l;
  return s;
}

void ServerProcess::wait_healthy() {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    if (!alive()) {
      const std::string st = exit_status();
      stop();
      fail("{}: server: expected {} to answer HTTP 200, got a server that ended during start-up ({}); its log "
           "{} ends:{}",
           spec_.name, spec_.health_url, st, spec_.log, log_tail());
    }
    if (http_get(spec_.health_url, 5) == 200) {
      health_s_ = since(t0);
      return;
    }
    if (since(t0) > spec_.startup_timeout_s) {
      stop();
      fail("{}: server: expected {} to answer HTTP 200 within {} s (startup_timeout), got no healthy answer; the "
           "server was stopped; its log {} ends:{}",
           spec_.name, spec_.health_url, spec_.startup_timeout_s, spec_.log, log_tail());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

void ServerProcess::stop() {
  if (pid_ <= 0) return;
  // Only our own group: g_group may already be cleared by the signal handler, which stopped it.
  pid_t expected = pid_;
  g_group.compare_exchange_strong(expected, -1);
  stop_group(pid_, static_cast<int>(spec_.stop_timeout_s * 1000));
  reap(false);
  pid_ = -1;
}

}  // namespace kc
