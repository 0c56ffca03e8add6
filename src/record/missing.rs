//! Why an expected minion did not return, and the fact that decided it: the
//! closed sets a `minion_missing` record carries (docs/records.md).

crate::label_set! {
    /// Why an expected minion did not return by the deadline.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum MissingReason {
        /// Targeted but not connected at publish (`missing` in the `new` event).
        NotConnected = "not_connected",
        /// It started (crashed or was restarted) after the publish, before any return.
        MinionRestarted = "minion_restarted",
        /// `saltutil.find_job` showed it no longer ran the job, yet no return came.
        Lost = "lost",
        /// `saltutil.find_job` showed it still running the job at the deadline.
        RunningPastDeadline = "running_past_deadline",
        /// Nothing from it at all until the deadline.
        NoResponse = "no_response",
        /// The job's life overlaps a bus gap: saltsight cannot know.
        UnknownGap = "unknown_gap",
        /// Targeted by a `salt -b` batch that never sent it the job: it did not
        /// answer the batch's `test.ping`, or the batch ended before its turn.
        NotSent = "not_sent",
    }
}

crate::label_set! {
    /// What decided a [`MissingReason`]: the fact behind the verdict.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum MissingEvidence {
        /// The master's `new` event listed it in `missing`.
        NewEventMissing = "new_event_missing",
        /// The job's life overlaps a bus gap.
        BusGap = "bus_gap",
        /// Its return came but could not be read.
        UnreadableReturn = "unreadable_return",
        /// A start event for it came after the publish.
        StartEvent = "start_event",
        /// A `saltutil.find_job` answer (or a `prog` event) said it ran the job.
        StillRunning = "still_running",
        /// A `saltutil.find_job` answer said it no longer ran the job.
        FindJobNotRunning = "find_job_not_running",
        /// Presence: not connected to the master when the job was published.
        PresenceAbsent = "presence_absent",
        /// Presence: disconnected from the master during the job.
        PresenceLost = "presence_lost",
        /// It said it ran the job, then left a later find_job unanswered.
        StoppedAnswering = "stopped_answering",
        /// Presence: connected through the job, yet silent (hung, or overloaded).
        ConnectedSilent = "connected_silent",
        /// Nothing at all: no return, no answer, no presence to tell.
        Nothing = "nothing",
        /// It did not answer the `test.ping` a batch starts with (Salt: "did
        /// not respond. No job will be sent.").
        BatchPingUnanswered = "batch_ping_unanswered",
        /// The batch halted (`--failhard`, `salt-run batch.stop`) before its turn.
        BatchHalted = "batch_halted",
        /// The batch ended, or stopped sending until saltsight's deadline,
        /// before its turn.
        BatchEnded = "batch_ended",
    }
}
