import { DshError } from '@dsh/context'

/**
 * - `HOST_INVALID_OPTIONS`: `createHost` was given an option it cannot use (a
 *   wrong value, or two options that exclude each other). Fix the call.
 * - `HOST_ROOT_INVALID`: the root is not usable: a file, under a file, a path
 *   this process cannot inspect (no permission on the way, a symbolic-link
 *   loop, too long), or (for a read-only host) not an existing dsh session
 *   root, or one whose persistence marker cannot be read; `details.code` names
 *   the errno where there is one. Retrying cannot fix it; point at another
 *   directory, or fix the path's permissions or links.
 * - `HOST_EVENTS_NOT_STORED`: `dispose` closed the host while its persistence
 *   still held events the store had not taken (the server stayed away past
 *   the persistence's wait, a disk stayed full); `details` names the sessions
 *   and counts. The events are lost with the process.
 */
export type HostErrorCode = 'HOST_INVALID_OPTIONS' | 'HOST_ROOT_INVALID' | 'HOST_EVENTS_NOT_STORED'

export class HostError extends DshError<HostErrorCode> {}
