import { DshError } from '@dsh/context'

/**
 * - `HOST_INVALID_OPTIONS`: `createHost` was given an option it cannot use (a
 *   wrong value, or two options that exclude each other). Fix the call.
 * - `HOST_ROOT_INVALID`: the root is not usable: a file, under a file, or (for
 *   a read-only host) not an existing dsh session root. Retrying cannot fix it;
 *   point at another directory.
 * - `HOST_BACKEND_UNAVAILABLE`: the requested backend is not wired into
 *   `createHost` in this version (today: `postgres`). Pass the backend object
 *   yourself (`persistence: …`) or use the embedded defaults.
 */
export type HostErrorCode = 'HOST_INVALID_OPTIONS' | 'HOST_ROOT_INVALID' | 'HOST_BACKEND_UNAVAILABLE'

export class HostError extends DshError<HostErrorCode> {}
