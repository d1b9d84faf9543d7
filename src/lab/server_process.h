// One inference server started by kerncheck (`kerncheck floor`): its port checked free first, its own
// process group (so the engine's worker processes go with it), its output kept in a log, stopped with
// SIGTERM then SIGKILL on the whole group — when the recording is done, on an error (the destructor), at
// exit, and on SIGINT / SIGTERM / SIGHUP to kerncheck (a handler stops the group, then lets the signal end
// kerncheck as it would have). If kerncheck is killed outright (SIGKILL), the server's first process gets
// SIGTERM from the kernel (PR_SET_PDEATHSIG). One server at a time.
#pragma once
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace kc {

struct ServerSpec {
  std::string name;                          // the configuration, for messages
  std::vector<std::string> argv;             // the command; argv[0] is looked up in PATH
  std::map<std::string, std::string> env;    // set on top of kerncheck's environment
  std::string host = "127.0.0.1";
  int port = 0;                              // checked free before the start
  std::string health_url;                    // GET until HTTP 200
  double startup_timeout_s = 600, stop_timeout_s = 30;
  std::string log;                           // stdout and stderr go here (appended)
};

// True when nothing listens on host:port (a bind succeeds).
bool port_is_free(const std::string& host, int port);
// A port the system says is free now (bind to port 0).
int free_port(const std::string& host);

// GET url with a timeout; returns the HTTP status (0: no answer) and fills *body.
long http_get(const std::string& url, double timeout_s, std::string* body = nullptr);

class ServerProcess {
 public:
  // Refuses (kc::Error) a port in use and a second live server; starts the command.
  explicit ServerProcess(const ServerSpec& spec);
  ~ServerProcess();  // stop()
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Polls the health URL until HTTP 200. Throws kc::Error, after stopping the server, when it exits first
  // or the timeout passes, with the end of its log.
  void wait_healthy();
  bool alive();              // the first process has not exited
  std::string exit_status(); // "exit code N", "killed by signal N", or "running"
  std::string log_tail(int lines = 20) const;
  void stop();               // SIGTERM to the group, up to stop_timeout_s, then SIGKILL; idempotent
  pid_t pid() const { return pid_; }
  double seconds_to_health() const { return health_s_; }

 private:
  ServerSpec spec_;
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  double health_s_ = 0;
  void reap(bool block);
};

}  // namespace kc
