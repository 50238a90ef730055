/**
 * `@dsh/driver-openai/testing/requests` — for benchmarks and tests only.
 *
 * The driver's own request building, as each model step runs it: the Chat
 * messages (`requestMessages`) or the Responses input (`requestInput`) of a
 * session's next request, from its `sessionContext` through the renderers
 * the driver keeps per session, and `requestStats`, what that building has
 * cost so far in counts (renders, compared messages, notices phrased,
 * attachment checks), so a bound on a step's work is a count, not a time.
 */
export type { ChainTarget } from '../chain.js'
export type { RequestOptions, RequestStats, ResponsesRequestInput } from '../requests.js'
export { requestInput, requestMessages, requestStats } from '../requests.js'
