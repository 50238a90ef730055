/**
 * `@dsh/host/query`: the query host alone (`createQueryHost`). Importing it
 * loads the store, persistence and query packages and nothing else of the
 * host (no projections, cache, subagents, verify, reindex or HTTP layer):
 * the entry point of read commands, whose cost is mostly module loading.
 * `@dsh/host` exports the same function.
 */
export type { QueryHost, QueryHostOptions } from './query-host.js'
export { createQueryHost } from './query-host.js'
