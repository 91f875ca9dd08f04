//! The outputs of a recorded operation, shared by the two recorders: a deferred operation on
//! `Fusion<B>` (`fusion::Lazy`) and a call of an op on a Remote server (`remote::Call`). Both
//! declare their outputs one group at a time (one tensor, an optional one, a `Vec`) and hand
//! them back in that order; this module depends on neither.

/// How many tensors one declared output stands for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Group {
    One,
    Option(bool),
    Vec(usize),
}

/// The outputs of a recorded operation, taken in the order they were declared.
#[derive(Debug)]
pub struct Outputs<T> {
    tensors: std::vec::IntoIter<T>,
    groups: std::vec::IntoIter<Group>,
}

impl<T> Outputs<T> {
    /// `tensors`, in groups of `groups` (a present option and each element of a `Vec` count one
    /// tensor each).
    pub(crate) fn new(tensors: Vec<T>, groups: Vec<Group>) -> Self {
        Self {
            tensors: tensors.into_iter(),
            groups: groups.into_iter(),
        }
    }

    fn next(&mut self) -> T {
        self.tensors.next().expect("one tensor per declared output")
    }

    fn group(&mut self) -> Group {
        self.groups
            .next()
            .expect("outputs are taken as they were declared")
    }

    /// The next output, declared as one tensor (`output`).
    pub fn one(&mut self) -> T {
        let group = self.group();
        debug_assert!(matches!(group, Group::One), "{group:?}");
        self.next()
    }

    /// The next output, declared as an optional one (`output_option`, or a gradient).
    pub fn option(&mut self) -> Option<T> {
        match self.group() {
            Group::Option(present) => present.then(|| self.next()),
            group => unreachable!("an `option` output was declared as {group:?}"),
        }
    }

    /// The next output, declared as a `Vec` (`output_vec`).
    pub fn vec(&mut self) -> Vec<T> {
        match self.group() {
            Group::Vec(len) => (0..len).map(|_| self.next()).collect(),
            group => unreachable!("a `vec` output was declared as {group:?}"),
        }
    }

    /// The next `N` outputs, each declared optional (the gradients of a backward kernel on
    /// Remote: `None` where not wanted).
    pub fn gradients<const N: usize>(&mut self) -> [Option<T>; N] {
        std::array::from_fn(|_| self.option())
    }
}
