// Test hook for the fault tests (issue 17): ALPHA_DIST_INJECT="ACTION:RANK:STEP" makes rank RANK, when it
// begins step STEP (1-based), die by SIGKILL ("kill"), throw a DistError ("throw"), or stop answering its
// collectives ("hang": sleeps; the other ranks' watchdog must end the job). Unset: does nothing.
#pragma once
#include <cstdint>

namespace alpha::dist {

void inject_fault_at_step(int64_t step);

}  // namespace alpha::dist
