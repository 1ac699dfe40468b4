// vlrt fetch URL --sha256 HEX --out FILE: a resumable, verified download.
#include <unistd.h>

#include <iostream>

#include "apps/commands.h"
#include "integrity/fetch.h"

namespace vlrt {

void add_fetch_command(CLI::App& app) {
  static FetchOptions o;
  auto* cmd = app.add_subcommand(
      "fetch", "Download a file over HTTP(S), resuming after drops, and keep it only if its SHA-256 matches");
  cmd->add_option("url", o.url, "http:// or https:// URL")->required();
  cmd->add_option("--sha256", o.sha256, "expected SHA-256 (64 hex digits)")->required();
  cmd->add_option("--size", o.size, "expected size in bytes")->check(CLI::NonNegativeNumber);
  cmd->add_option("-o,--out", o.out, "destination file (the download goes to FILE.part first)")->required();
  cmd->add_option("--retries", o.retries, "retries after transient errors (drops, timeouts, 5xx)")
      ->check(CLI::Range(0, 100));
  cmd->callback([] {
    o.log = &std::cerr;
    o.bar = isatty(STDERR_FILENO);
    FetchResult r = fetch(o);
    if (r.already_present) {
      std::cout << o.out << ": already present, hash OK\n";
      return;
    }
    std::cout << o.out << ": " << r.bytes << " bytes, hash OK (" << r.requests
              << (r.requests == 1 ? " request" : " requests")
              << (r.resumed_from ? cat(", resumed from byte ", r.resumed_from) : "") << ")\n";
  });
}

}  // namespace vlrt
