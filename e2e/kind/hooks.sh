# shellcheck shell=bash
# Platform hooks of e2e/scenarios.sh on kind (E2E_HOOKS=e2e/kind/hooks.sh): scenarios.sh's
# defaults already fit an operator running as the Deployment of deploy/; this adds the L4
# scenarios (real backups and restores), whose defaults fit real pods (psql by kubectl exec).
# shellcheck source=e2e/scenarios-l4.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scenarios-l4.sh"
