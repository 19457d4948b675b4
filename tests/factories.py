"""factory_boy factories and the example tree of the budget-governance issue."""

import factory
from django.contrib.auth import get_user_model

EXAMPLE_TREE = {
    "name": "org",
    "managers": ["ceo"],
    "children": [
        {
            "name": "prog-a",
            "weight": 50,
            "managers": ["lead-a"],
            "children": [
                {"name": "a1", "weight": 70, "managers": ["pi-a1"], "members": ["ann"]},
                {"name": "a2", "weight": 30, "members": ["bob"]},
            ],
        },
        {
            "name": "prog-b",
            "weight": 50,
            "managers": ["lead-b"],
            "children": [{"name": "b1", "weight": 1}],
        },
    ],
}


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")

    @factory.post_generation
    def password(self, create, extracted, **kwargs):
        self.set_password(extracted or "pw")
        if create:
            self.save(update_fields=["password"])


class SuperUserFactory(UserFactory):
    is_superuser = True
    is_staff = True


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "scheduler.Cluster"

    name = factory.Sequence(lambda n: f"cluster{n}")
    host_count = 10
    gpus_per_host = 8


class HostFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "scheduler.Host"

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"gpu{n:03d}")
    gpus = 8
