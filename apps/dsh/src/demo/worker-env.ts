/** The name the crash worker's PostgreSQL connections carry, so the demo can see them gone after the SIGKILL. */
export const CRASH_WORKER_APPLICATION = 'dsh-demo-crash-worker'

/** The environment variable the crash worker reads the store URL from (argv would show it in `ps`). */
export const CRASH_WORKER_STORE_ENV = 'DSH_DEMO_STORE'
