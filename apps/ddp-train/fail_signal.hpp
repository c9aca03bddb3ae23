#pragma once
// ddp-train's --fail_on_sigusr1: fault injection on request. A supervisor that wants one chosen
// worker to fail with an error exit at a moment of its choosing (a launcher's test, a fault
// soak) sends it SIGUSR1; the trainer exits 3 before its next step, as --fail_at_step does.

namespace ddp::train {

// Installs the SIGUSR1 handler (SA_RESTART: a blocking call in flight goes on).
void arm_fail_on_sigusr1();
// True once SIGUSR1 arrived after arm_fail_on_sigusr1().
bool is_fail_requested();

}  // namespace ddp::train
